"""Modules AITune records and the old exporter could not: gradients as AITune exports them, and
arguments bound as AITune's ForwardSignature binds them.

Each is recorded with the producer binary, so `producer bundle check` runs the exported graph with
ONNX Runtime on every recorded call against the eager outputs: a record that returns is a graph
that reproduces its recording.
"""

import json

import pytest

from conftest import need_aitune
from test_record import producer_or_skip

need_aitune()

import onnx  # noqa: E402
import torch  # noqa: E402

import models  # noqa: E402
import tunefleet  # noqa: E402
from tunefleet.tensors import read_tensor  # noqa: E402


def record(tmp_path, module, name, calls, **kw):
    kw.setdefault("producer", producer_or_skip())
    return tunefleet.record(module, name, calls, tmp_path / "bundle", **kw)


def manifest(out):
    return json.loads((out / "bundle.json").read_text())


def onnx_inputs(out, g=0):
    m = onnx.load(str(out / "graphs" / str(g) / "model.onnx"))
    return [v.name for v in m.graph.input]


def test_transformer_encoder_layer_records(tmp_path):
    torch.manual_seed(0)
    m = models.TransformerLayer().eval()
    calls = [(torch.randn(2, 5, 16),), (torch.randn(3, 7, 16),)]
    out = record(tmp_path, m, "tests.TransformerLayer", calls)
    g = manifest(out)["graphs"][0]
    assert g["inputs"][0]["shape"] == ["batch0", "dim1", 16]
    ops = {n.op_type for n in onnx.load(str(out / "graphs/0/model.onnx")).graph.node}
    assert "MatMul" in ops and not any("transformer" in o.lower() for o in ops)
    # The reference is the module's own output, equal to eager (no_grad) where the fast path is exact.
    with torch.no_grad():
        want = m(*calls[1])
    torch.testing.assert_close(read_tensor(out / "graphs/0/samples/1/output_0.pb"), want, atol=1e-5, rtol=1e-4)
    assert "forward" not in m.__dict__ and torch.is_grad_enabled()
    assert not any(x.training for x in m.modules()), "record left the module in training mode"


def test_multihead_attention_with_bool_padding_mask_records(tmp_path):
    torch.manual_seed(0)
    m = models.MaskedAttention().eval()
    calls = [models.padded(2, 5, seed=1), models.padded(4, 6, seed=2)]
    out = record(tmp_path, m, "tests.MaskedAttention", calls)
    assert onnx_inputs(out) == ["input_x", "input_pad"]
    with torch.no_grad():
        want = m(*calls[1])
    torch.testing.assert_close(read_tensor(out / "graphs/0/samples/1/output_0.pb"), want, atol=1e-5, rtol=1e-4)


def test_transformer_encoder_with_padding_mask_records(tmp_path):
    torch.manual_seed(0)
    m = models.PaddedEncoder().eval()
    calls = [models.padded(2, 5, seed=1), models.padded(4, 8, seed=2)]
    out = record(tmp_path, m, "tests.PaddedEncoder", calls)
    g = manifest(out)["graphs"][0]
    assert [i["shape"] for i in g["inputs"]] == [["batch0", "dim1", 16], ["batch0", "dim1"]]
    # Unpadded positions equal eager under no_grad (its fast path zeroes padded ones; the graph, like
    # eager with gradients on, computes them).
    x, pad = calls[1]
    with torch.no_grad():
        want = m(x, pad)
    got = read_tensor(out / "graphs/0/samples/1/output_0.pb")
    torch.testing.assert_close(got[~pad], want[~pad], atol=1e-5, rtol=1e-4)


def test_trailing_dict_argument_is_an_argument(tmp_path):
    m = models.TrailingDict().eval()
    ids = torch.arange(12).reshape(3, 4) % 32
    calls = [(ids, {"mask": torch.ones(3, 4)}), (ids[:2], {"mask": torch.rand(2, 4)})]
    out = record(tmp_path, m, "tests.TrailingDict", calls)
    assert onnx_inputs(out) == ["input_input_ids", "input_options_mask"]
    block = manifest(out)["aitune"]["graphs"]["0"]
    assert block["inputs"][1]["path"] == [["options", "DICT"], ["mask", "DICT"]]


def test_star_args(tmp_path):
    m = models.StarArgs().eval()
    calls = [(torch.randn(2, 4), torch.randn(2, 4), torch.randn(2, 4)), (torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4))]
    out = record(tmp_path, m, "tests.StarArgs", calls)
    assert onnx_inputs(out) == ["input_x", "input_rest_0", "input_rest_1"]
    sig = manifest(out)["aitune"]["forward_signature"]["parameters"]
    assert [(p["name"], p["kind"]) for p in sig] == [("x", "POSITIONAL_OR_KEYWORD"), ("rest", "VAR_POSITIONAL")]


def test_keyword_only_and_var_keywords(tmp_path):
    m = models.VarKeywords().eval()
    calls = [tunefleet.Call((torch.randn(2, 4),), {"scale": 2.0, "b": torch.randn(2, 4), "a": torch.randn(2, 4)}),
             tunefleet.Call((torch.randn(3, 4),), {"scale": 2.0, "b": torch.randn(3, 4), "a": torch.randn(3, 4)})]
    out = record(tmp_path, m, "tests.VarKeywords", calls)
    assert onnx_inputs(out) == ["input_x", "input_extra_b", "input_extra_a"]
    block = manifest(out)["aitune"]["graphs"]["0"]
    assert block["other_inputs"] == [{"path": [["scale", "DICT"]], "value": 2.0}]


def test_non_tensor_leaves_are_constants_of_the_graph(tmp_path):
    m = models.MixedLeaves().eval()
    calls = [(torch.randn(2, 4), {"double": True, "bias": torch.randn(2, 4), "extra": None}),
             (torch.randn(3, 4), {"double": True, "bias": torch.randn(3, 4), "extra": None})]
    out = record(tmp_path, m, "tests.MixedLeaves", calls)
    assert onnx_inputs(out) == ["input_x", "input_cfg_bias"]
    block = manifest(out)["aitune"]["graphs"]["0"]
    assert block["other_inputs"] == [{"path": [["cfg", "DICT"], ["double", "DICT"]], "value": True},
                                     {"path": [["cfg", "DICT"], ["extra", "DICT"]], "value": None}]


def test_an_input_forward_ignores_stays_an_input(tmp_path):
    # AITune's backends bind only what an engine has; the graph keeps the input so the bundle's
    # declarations and the call's tensors line up.
    out = record(tmp_path, models.IgnoresArgument(), "tests.Ignores", [(torch.randn(2, 3), torch.randn(2, 3))])
    assert onnx_inputs(out) == ["input_x", "input_unused"]


def test_forward_that_raises_is_a_record_error(tmp_path):
    class Boom(torch.nn.Module):
        def forward(self, x):
            return x.view(5, -1)

    with pytest.raises(tunefleet.RecordError, match=r"calls\[0\]: .*Boom.forward raised RuntimeError: shape '\[5, -1\]'"):
        record(tmp_path, Boom(), "tests.Boom", [(torch.randn(2, 3),)], producer=False)
    assert list(tmp_path.iterdir()) == []


def test_a_traced_in_length_is_caught_at_record_time(tmp_path):
    calls = [(torch.randn(2, 50),), (torch.randn(2, 80),)]
    with pytest.raises(tunefleet.RecordError) as e:
        record(tmp_path, models.BakedLength(), "tests.Baked", calls)
    msg = str(e.value)
    # traced from the most general call (the larger one), the other fails
    assert msg.startswith("calls[0] (graph 0): ONNX Runtime cannot run the exported graph: "), msg
    assert "requested shape" in msg and "the graph reproduces calls[1], the call it was traced from, but not calls[0]" in msg
    assert "baked" in msg and "int(x.shape[1])" in msg
    assert list(tmp_path.iterdir()) == []


def test_external_data_is_gathered_into_one_file_with_offset_and_length(tmp_path):
    # torch 1.13 writes a >2 GB model one file per weight; the recorder gathers them (streaming) into
    # model.onnx.data, as AITune's exporter writes it. Here on a small model saved the torch-1.13 way.
    import numpy as np
    from onnx import helper, numpy_helper

    from tunefleet.export import _gather_external

    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((8, 300)).astype(np.float32), rng.standard_normal((300, 4)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["y"])], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    path = tmp_path / "model.onnx"
    onnx.save_model(helper.make_model(graph), str(path), save_as_external_data=True, all_tensors_to_one_file=False,
                    size_threshold=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "w1", "w2"]
    _gather_external(onnx.load(str(path), load_external_data=False), path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "model.onnx.data"]
    onnx.checker.check_model(str(path))
    for t in onnx.load(str(path), load_external_data=False).graph.initializer:
        info = {e.key: e.value for e in t.external_data}
        assert info["location"] == "model.onnx.data" and int(info["offset"]) % 4096 == 0, info
        assert int(info["length"]) == {"w1": w1, "w2": w2}[t.name].nbytes
    loaded = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}
    assert loaded["w1"].tobytes() == w1.tobytes() and loaded["w2"].tobytes() == w2.tobytes()


class GridSample(torch.nn.Module):
    def forward(self, x):  # no symbolic at opset 14, one at 16
        return torch.nn.functional.grid_sample(x, torch.zeros(x.shape[0], 2, 2, 2), align_corners=False)


class ZeroedSlice(torch.nn.Module):
    """swin_v2's attention in miniature: Tensor.zero_ on a slice, aten::zero, which torch 1.13 exports at no opset."""

    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(6))

    def forward(self, x):
        b = self.bias.clone()
        b[2:4].zero_()
        return x + b


@pytest.mark.parametrize("module,opset", [(GridSample, 17), (ZeroedSlice, 14)], ids=["newer opset", "aten::zero"])
def test_operators_the_default_opset_lacks_still_export(tmp_path, module, opset):
    calls = [(torch.randn(2, 1, 3, 3),), (torch.randn(4, 1, 3, 3),)] if module is GridSample else \
        [(torch.randn(1, 6),), (torch.randn(3, 6),)]
    out = record(tmp_path, module().eval(), "tests.Opset", calls)
    assert [o.version for o in onnx.load(str(out / "graphs/0/model.onnx")).opset_import if o.domain == ""] == [opset]
    # the symbolic was registered for that export only, and the registry left as it was
    from torch.onnx import _constants
    from torch.onnx._internal import registration
    assert not registration.registry.is_registered_op("aten::zero", _constants.ONNX_BASE_OPSET) or module is GridSample
    assert registration.registry.get_function_group("aten::zero") is None


def test_an_operator_given_a_symbolic_exports_again_in_the_same_process(tmp_path):
    """Two models that need aten::zero's symbolic, one after the other in one process (the zoo's
    swin_t then swin_v2_t): torch used to keep an empty function group after the first, and the
    second failed with "min() arg is an empty sequence"."""
    for i in range(2):
        out = record(tmp_path / str(i), ZeroedSlice().eval(), "tests.Opset", [(torch.randn(1, 6),), (torch.randn(3, 6),)])
        assert (out / "graphs/0/model.onnx").exists()
