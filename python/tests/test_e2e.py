"""End to end: record -> producer submit (embedded queue and workers) -> producer fetch --format aitune -> ait.load.

One module is recorded with tunefleet.record, tuned by the real pipeline
(ONNX Runtime on the CPU), and its fetched AITune checkpoint is loaded with
AITune's own ait.load through tunefleet.load. ait.load runs to the end on a
CPU for an ONNX Runtime checkpoint: the only stand-in is the CUDA ONNX
Runtime session, which here opens and checks the relocated model. Then every
graph gets a call: AITune routes it, maps its inputs, and rebuilds the
output from what ONNX Runtime computed for exactly those inputs (by the
`producer bundle from-onnx` reference path); that output must match the eager
module within tolerance.
"""

import hashlib
import json
import os
import subprocess
import sys

import pytest

from conftest import need_aitune, producer_binary

need_aitune()

import torch  # noqa: E402

import models  # noqa: E402
import schemas  # noqa: E402
import onnxruntime  # noqa: E402  (the stand-in in tests/stubs)
import tunefleet  # noqa: E402
from aitune_cpu import EngineCalls, canon, run_engine_on_cpu  # noqa: E402
from tunefleet.tensors import read_tensor  # noqa: E402


def producer():
    p = producer_binary()
    if not p.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{p} is missing; CI builds it first (make build)", pytrace=False)
        pytest.skip(f"{p} is missing (make build)")
    if not os.environ.get("ONNXRUNTIME_SHARED_LIBRARY_PATH"):
        lib = producer_binary().parent.parent / "third_party" / "onnxruntime" / "lib" / "libonnxruntime.so"
        if not lib.exists():
            if os.environ.get("CI"):
                pytest.fail("the ONNX Runtime library is missing (make ort)", pytrace=False)
            pytest.skip("the ONNX Runtime library is missing (make ort)")
    return str(p)


def run(*args):
    res = subprocess.run(list(args), capture_output=True, text=True)
    assert res.returncode == 0, f"{' '.join(args)}: exit {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res.stdout


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ort_reference(bin_, model, shapes, out):
    """ONNX Runtime's outputs for random inputs of the given shapes (by from-onnx's reference path)."""
    flags = []
    for name, shape in shapes.items():
        dims = "x".join(map(str, shape))
        flags += ["--shape", f"{name}:{dims}..{dims}"]
    run(bin_, "bundle", "from-onnx", str(model), "--samples", "1", "--out", str(out), *flags)
    g = json.loads((out / "bundle.json").read_text())["graphs"][0]
    sample = out / g["samples"][0]
    inputs = {d["name"]: read_tensor(sample / f"input_{k}.pb") for k, d in enumerate(g["inputs"])}
    outputs = {d["name"]: read_tensor(sample / f"output_{k}.pb") for k, d in enumerate(g["outputs"])}
    return inputs, outputs


def test_recorded_module_tunes_fetches_and_loads_with_aitune(tmp_path):
    bin_ = producer()
    name = "tests.TwoGraphs"
    calls = [c if isinstance(c[0], torch.Tensor) else tunefleet.Call(*c) for c in models.two_graph_calls()]
    bundle = tunefleet.record(models.two_graphs(), name, calls, tmp_path / "bundle", producer=bin_)

    store = f"file://{tmp_path / 'store'}"
    run(bin_, "submit", str(bundle), "--store", store, "--target", "cpu", "--strategy", "first-wins",
        "--candidates", "ort:cpu:basic", "--bench-time", "50ms")
    ckpt = tmp_path / "ckpt"
    run(bin_, "fetch", name, "--platform", "cpu", "--store", store, "--format", "aitune", "--out", str(ckpt))
    assert (ckpt / f"{name}.ait").is_file()
    # What the store and a plain fetch hold is what schemas/ publishes: state.json, latest.json and
    # each graph's result.json.
    deploy = tmp_path / "deploy"
    run(bin_, "fetch", name, "--platform", "cpu", "--store", store, "--out", str(deploy))
    st = json.loads((deploy / "state.json").read_text())
    assert schemas.problems("state.schema.json", st) == []
    latest = sorted((tmp_path / "store" / "models" / name).glob("*/latest.json"))
    results = sorted((tmp_path / "store" / "runs").glob("*/graphs/*/result.json"))
    assert len(latest) == 2 and len(results) == 2, (latest, results)  # by platform key and by class
    for p in latest:
        assert schemas.problems("latest.schema.json", json.loads(p.read_text())) == [], p
    for p in results:
        assert schemas.problems("result.schema.json", json.loads(p.read_text())) == [], p

    onnxruntime.SESSIONS.clear()
    loaded = tunefleet.load(models.two_graphs(), ckpt)  # ait.load, all the way through deploy
    assert type(loaded).__name__ == "Module" and loaded.state.value == "tuned"
    tuned = loaded._self_wrapper
    backends = list(tuned.backends.values())
    assert [type(b).__name__ for b in backends] == ["ONNXRuntimeBackend"] * 2
    assert [b._graph_spec.name for b in backends] == ["0", "1"]
    # Each deployed session opened the graph the bundle recorded, relocated into the checkpoint.
    assert [s.path for s in onnxruntime.SESSIONS] == [str(b._onnx_model_artifact.path) for b in backends]
    for g, b in enumerate(backends):
        assert b._onnx_model_artifact.path.is_relative_to(ckpt / name)
        assert sha256(b._onnx_model_artifact.path) == sha256(bundle / "graphs" / str(g) / "model.onnx")
    assert onnxruntime.SESSIONS[0].providers == [("CUDAExecutionProvider", {"device_id": 0})]

    # AITune's to_dict re-serializes what the Go side wrote.
    state = torch.load(ckpt / name / "state_dict.pt", weights_only=False)
    assert canon(loaded.to_dict()) == canon(state)
    # ...and AITune's own writer saves it again into a checkpoint that loads back to the same state.
    import aitune.torch as ait
    from aitune.torch import LocalTorchStorage

    ait.save(loaded, name, storage=LocalTorchStorage(base_folder=tmp_path / "resaved"))
    assert (tmp_path / "resaved" / f"{name}.ait").is_file()
    again = tunefleet.load(models.two_graphs(), tmp_path / "resaved")
    # AITune nests the re-saved artifacts one level deeper (1/1/ + the loaded 1/1/model_raw.onnx); compare
    # them by content.
    by_content = lambda a: sha256(a.path)  # noqa: E731
    assert canon(again.to_dict(), artifact=by_content) == canon(loaded.to_dict(), artifact=by_content)

    # Every graph: AITune routes a call to it and rebuilds ONNX Runtime's output, which matches eager torch.
    eager = models.two_graphs()
    seen = EngineCalls()
    ort_out = {}
    for g, b in enumerate(backends):
        run_engine_on_cpu(b, str(g), lambda inputs, g=g: ort_out[g], seen)
    in0, ort_out[0] = ort_reference(bin_, backends[0]._onnx_model_artifact.path,
                                    {"input_x": [3, 8], "input_mask": [3, 4]}, tmp_path / "ort0")
    in1, ort_out[1] = ort_reference(bin_, backends[1]._onnx_model_artifact.path, {"input_x": [2, 8]}, tmp_path / "ort1")
    cases = [
        (0, ((in0["input_x"], in0["input_mask"]), {}), in0),
        (1, ((in1["input_x"],), {"scale": 2.0}), in1),
    ]
    for g, (args, kwargs), fed in cases:
        got = loaded(*args, **kwargs)
        assert seen.calls[-1][0] == str(g)
        assert seen.calls[-1][1].keys() == fed.keys()
        for k, v in seen.calls[-1][1].items():
            assert torch.equal(v, fed[k]), k  # AITune bound what ONNX Runtime was fed
        with torch.no_grad():
            want = eager(*args, **kwargs)
        assert set(got) == {"y", "n"} and isinstance(got["n"], tuple) and got["n"][1] == 3
        torch.testing.assert_close(got["y"], want["y"], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(got["n"][0], want["n"][0], atol=1e-5, rtol=1e-4)
    with pytest.raises(RuntimeError, match="No backend found"):
        loaded(in1["input_x"], scale=3.0)  # scale is a routing key: 3.0 was never recorded


def test_readme_example_records_a_valid_bundle(tmp_path):
    """python/examples/record_mlp.py, run as the README shows it (CPU-only PYTHONPATH)."""
    from conftest import ORACLES, REPO, STUBS

    bin_ = producer()
    env = dict(os.environ, TUNEFLEET_PRODUCER=bin_,
               PYTHONPATH=os.pathsep.join([str(REPO / "python"), str(ORACLES), str(STUBS)]))
    res = subprocess.run([sys.executable, str(REPO / "python" / "examples" / "record_mlp.py")], cwd=tmp_path,
                         env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    m = json.loads((tmp_path / "mlp-bundle" / "bundle.json").read_text())
    assert m["model"] == "demo.MLP" and m["graphs"][0]["inputs"][0]["shape"] == ["batch0", 64]
