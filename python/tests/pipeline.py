"""The whole path a user takes, for the end-to-end and zoo tests.

record (tunefleet.record, which checks every graph with `producer bundle check`) -> `producer submit`
(embedded queue and workers, ONNX Runtime on the CPU, a file:// store) -> `producer fetch --format
aitune` -> tunefleet.load (AITune's own ait.load) -> calls through AITune's routing and output
rebuilding, with the engine's outputs computed by ONNX Runtime on the checkpoint's own model.
"""

import json
import subprocess
import time

import torch

import onnxruntime  # noqa: F401  (the stand-in in tests/stubs)
import tunefleet
from aitune_cpu import EngineCalls, run_engine_on_cpu
from tunefleet.tensors import read_tensor


def run(*args):
    res = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    assert res.returncode == 0, f"{' '.join(map(str, args))}: exit {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res.stdout


def tune(bin_, bundle, name, work, candidates="ort:cpu:basic", bench="20ms"):
    """submit + fetch --format aitune; returns (checkpoint dir, submit seconds, fetch seconds)."""
    store = f"file://{work / 'store'}"
    t0 = time.perf_counter()
    run(bin_, "submit", bundle, "--store", store, "--target", "cpu", "--strategy", "first-wins",
        "--candidates", candidates, "--bench-time", bench)
    t1 = time.perf_counter()
    ckpt = work / "ckpt"
    run(bin_, "fetch", name, "--platform", "cpu", "--store", store, "--format", "aitune", "--out", ckpt)
    return ckpt, t1 - t0, time.perf_counter() - t1


def max_check_diff(rep):
    """The largest |ONNX Runtime - eager| over every sample of a `producer bundle check -o json` report
    (None when the report gives only verdicts: every output then agreed within the bundle's tolerances)."""
    assert rep["ok"], rep
    if not any("max_abs_diff" in o for g in rep["graphs"] for s in g["samples"] for o in s.get("outputs", [])):
        return None
    return max((o["max_abs_diff"] or 0.0) for g in rep["graphs"] for s in g["samples"] for o in s["outputs"])


def ort_outputs(bin_, model, shapes, out, values=(), int_range="0..9"):
    """Random inputs of the given shapes and ONNX Runtime's outputs for them (from-onnx's reference path)."""
    flags = []
    for name, shape in shapes.items():
        dims = "x".join(map(str, shape))
        flags += ["--shape", f"{name}:{dims}..{dims}"]
    for v in values:
        flags += ["--value", v]
    run(bin_, "bundle", "from-onnx", model, "--samples", "1", "--int-range", int_range, "--out", out, *flags)
    g = json.loads((out / "bundle.json").read_text())["graphs"][0]
    sample = out / g["samples"][0]
    inputs = {d["name"]: read_tensor(sample / f"input_{k}.pb") for k, d in enumerate(g["inputs"])}
    outputs = {d["name"]: read_tensor(sample / f"output_{k}.pb") for k, d in enumerate(g["outputs"])}
    return inputs, outputs


class Loaded:
    """A fetched checkpoint loaded with AITune; call(g, args, kwargs, fed, engine_out) runs graph g's
    backend with the engine's outputs given (ONNX Runtime's, from ort_outputs) and checks that AITune
    routed the call to g and bound exactly the inputs ONNX Runtime was fed."""

    def __init__(self, module, ckpt):
        self.module = tunefleet.load(module, ckpt)
        self.backends = list(self.module._self_wrapper.backends.values())
        self.seen = EngineCalls()
        self.next = {}
        for g, b in enumerate(self.backends):
            run_engine_on_cpu(b, str(g), lambda inputs, g=g: self.next[g], self.seen)

    def model(self, g):
        return self.backends[g]._onnx_model_artifact.path

    def call(self, g, args, kwargs, fed, engine_out):
        self.next[g] = engine_out
        got = self.module(*args, **kwargs)
        name, bound, _ = self.seen.calls[-1]
        assert name == str(g), f"AITune routed the call to graph {name}, want {g}"
        assert bound.keys() == fed.keys(), (bound.keys(), fed.keys())
        for k, v in bound.items():
            assert torch.equal(v, fed[k]), k
        return got


def leaves(obj):
    """The tensor leaves of an output, in AITune's locator order."""
    from aitune.torch.module.locator import Locator

    return [v for _, v in Locator.find_leaves(obj, only_tensors=True)]


def max_abs_err(got, want):
    g, w = leaves(got), leaves(want)
    assert len(g) == len(w), (len(g), len(w))
    err = 0.0
    for a, b in zip(g, w):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        if a.numel():
            err = max(err, (a.double() - b.double()).abs().max().item())
    return err
