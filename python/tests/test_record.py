"""tunefleet.record against Debian's torch and AITune's real recording code."""

import json
import os

import pytest

from conftest import need_aitune, producer_binary

need_aitune()

import onnx  # noqa: E402
import torch  # noqa: E402

import aitune.torch as ait  # noqa: E402
from aitune.torch.module_registry import MODULE_REGISTRY  # noqa: E402

import models  # noqa: E402
import schemas  # noqa: E402
import tunefleet  # noqa: E402
from tunefleet.tensors import read_tensor  # noqa: E402


def producer_or_skip():
    p = producer_binary()
    if not p.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{p} is missing; CI builds it first (make build)", pytrace=False)
        pytest.skip(f"{p} is missing (make build)")
    return p


def record_two_graphs(tmp_path, **kw):
    kw.setdefault("producer", False)
    calls = [c if isinstance(c[0], torch.Tensor) else tunefleet.Call(*c) for c in models.two_graph_calls()]
    return tunefleet.record(models.two_graphs(), "tests.TwoGraphs", calls, tmp_path / "bundle", **kw)


def test_bundle_holds_aitunes_graph_specs(tmp_path):
    out = record_two_graphs(tmp_path)
    m = json.loads((out / "bundle.json").read_text())
    assert m["format"] == "tunefleet.bundle/v1" and m["model"] == "tests.TwoGraphs"
    g0, g1 = m["graphs"]
    # Calls 0 and 1 are one graph (batch 1 and 4: a batch axis), call 2 another.
    assert [i["name"] for i in g0["inputs"]] == ["input_x", "input_mask"]
    assert g0["inputs"][0] == {"name": "input_x", "dtype": "float32", "shape": ["batch0", 8],
                               "min_shape": [1, 8], "max_shape": [4, 8]}
    assert [o["name"] for o in g0["outputs"]] == ["output_y", "output_n_0"]
    assert g0["samples"] == ["graphs/0/samples/0", "graphs/0/samples/1"]
    assert [i["name"] for i in g1["inputs"]] == ["input_x"] and g1["inputs"][0]["shape"] == [2, 8]
    block = m["aitune"]
    assert block["format"] == "aitune.block/v1" and block["name"] == "tests.TwoGraphs"
    assert [p["name"] for p in block["forward_signature"]["parameters"]] == ["x", "mask", "scale"]
    b0, b1 = block["graphs"]["0"], block["graphs"]["1"]
    assert b0["inputs"][0] == {"name": "input_x", "path": [["x", "DICT"]], "bs_multipliers": [1.0, 8.0]}
    assert b0["outputs"][1] == {"name": "output_n_0", "path": [["n", "DICT"], [0, "SEQUENCE"]],
                                "bs_multipliers": [1.0, 4.0]}
    assert b0["output_skeleton"] == {"dict": {"y": None, "n": {"tuple": [None, 3]}}}
    assert b0["other_inputs"] == [] and b0["strict"] is True
    assert b1["other_inputs"] == [{"path": [["scale", "DICT"]], "value": 2.0}]
    # Samples are the calls; reference outputs are the eager module's.
    calls = models.two_graph_calls()
    eager = models.two_graphs()
    for k, (x, mask) in enumerate(calls[:2]):
        s = out / "graphs" / "0" / "samples" / str(k)
        assert torch.equal(read_tensor(s / "input_0.pb"), x) and torch.equal(read_tensor(s / "input_1.pb"), mask)
        with torch.no_grad():
            want = eager(x, mask)
        assert torch.equal(read_tensor(s / "output_0.pb"), want["y"])
        assert torch.equal(read_tensor(s / "output_1.pb"), want["n"][0])
    # bundle.json and its aitune block are what schemas/ publishes.
    assert schemas.problems("bundle.schema.json", m) == []
    assert schemas.problems("aitune-block.schema.json", block) == []
    # The ONNX graphs bind by AITune's names.
    for g in m["graphs"]:
        model = onnx.load(str(out / g["onnx"]))
        assert [v.name for v in model.graph.input] == [i["name"] for i in g["inputs"]]
        assert [v.name for v in model.graph.output] == [o["name"] for o in g["outputs"]]


def test_the_users_module_is_left_as_it_was(tmp_path):
    m = models.two_graphs()
    forward = m.forward
    tunefleet.record(m, "tests.Left", [(torch.randn(2, 8),)], tmp_path / "b", producer=False)
    assert "forward" not in m.__dict__ and m.forward == forward
    assert "tests.Left" not in MODULE_REGISTRY._registry
    m(torch.randn(3, 8))  # plain eager call, no recording
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_producer_validates_the_bundle(tmp_path):
    p = producer_or_skip()
    out = record_two_graphs(tmp_path, producer=p)
    assert (out / "bundle.json").is_file()


def test_explicit_dynamic_shapes_reach_bundle_json(tmp_path):
    p = producer_or_skip()
    dyn = {"x": (ait.BatchDim("batch", 1, 16, 4), 8)}
    out = tunefleet.record(models.two_graphs(), "tests.Dyn", [(torch.randn(2, 8),), (torch.randn(5, 8),)],
                           tmp_path / "b", dynamic_shapes=dyn, producer=p)
    m = json.loads((out / "bundle.json").read_text())
    assert schemas.problems("bundle.schema.json", m) == []
    assert m["dynamic_shapes"] == {"input_x": [{"name": "batch", "min": 1, "max": 16, "opt": 4, "batch": True}, 8]}


def test_validation_failure_leaves_nothing(tmp_path):
    fake = tmp_path / "producer"
    fake.write_text("#!/bin/sh\necho 'graph 0: nope' >&2\nexit 2\n")
    fake.chmod(0o755)
    with pytest.raises(tunefleet.RecordError, match="producer bundle check rejected the bundle.*graph 0: nope"):
        record_two_graphs(tmp_path / "w", producer=fake)
    assert list((tmp_path / "w").iterdir()) == []


BAD = [
    # (what, module, name, calls, message)
    ("name with /", models.two_graphs, "team/model", [(torch.randn(2, 8),)], r"name 'team/model' contains '/'"),
    ("calls disagree in output structure", models.GrowingTuple, "tests.Growing",
     [(torch.randn(1, 3),), (torch.randn(2, 3),)],
     r"calls\[0\] and calls\[1\] take the same inputs \(AITune graph 0\) but return differently structured outputs"),
    ("calls disagree in non-tensor outputs", models.CountingOutput, "tests.Counting",
     [(torch.randn(1, 3),), (torch.randn(2, 3),)],
     r"calls\[0\] and calls\[1\] take the same inputs \(AITune graph 0\) but return different non-tensor output values"),
    ("dataclass output", models.DataclassOutput, "tests.DC", [(torch.randn(2, 3),)],
     r"output is a Result: outputs must be tensors in tuple, list, dict, OrderedDict .* and namedtuple containers"),
    ("object leaf in output", models.ObjectLeaf, "tests.Leaf", [(torch.randn(2, 3),)],
     r"output\['device'\] is a device: outputs must be tensors"),
    ("call that does not fit forward", models.two_graphs, "tests.Fit", [(torch.randn(2, 8), None, 3)],
     r"calls\[0\] does not fit TwoGraphs.forward"),
    ("no calls", models.two_graphs, "tests.None", [], r"calls is empty"),
]


@pytest.mark.parametrize("what,cls,name,calls,message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_clear_error_and_no_bundle(tmp_path, what, cls, name, calls, message):
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(tunefleet.RecordError, match=message):
        tunefleet.record(cls(), name, calls, work / "bundle", producer=False)
    assert list(work.iterdir()) == [], f"{what}: left {list(work.iterdir())}"
    assert name not in MODULE_REGISTRY._registry


def test_existing_out_dir_is_refused_and_kept(tmp_path):
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "mine").write_text("keep")
    with pytest.raises(tunefleet.RecordError, match="already exists"):
        tunefleet.record(models.two_graphs(), "tests.Exists", [(torch.randn(2, 8),)], tmp_path / "bundle", producer=False)
    assert (tmp_path / "bundle" / "mine").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]


def test_schema_refuses_what_the_recorder_must_not_write(tmp_path):
    # The validator is not a pass-through: a recorded bundle.json with a wrong dtype, an unknown
    # key or a bad aitune block format is refused, each at its JSON path.
    out = record_two_graphs(tmp_path)
    m = json.loads((out / "bundle.json").read_text())
    bad = json.loads(json.dumps(m))
    bad["graphs"][0]["inputs"][0]["dtype"] = "float"
    bad["extra"] = 1
    bad["aitune"]["format"] = "aitune.block/v0"
    got = "\n".join(schemas.problems("bundle.schema.json", bad))
    assert "graphs/0/inputs/0/dtype" in got and "extra" in got and "aitune" in got, got
