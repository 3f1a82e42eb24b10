"""The GPU-only stand-ins refuse loudly, and none of them stands in for AITune.

Needs neither torch nor AITune, so this module always runs (pytest never
collects nothing, even where the torch tiers skip).
"""

import importlib
import sys

import pytest

from conftest import STUBS

sys.path.insert(0, str(STUBS))

from _gpu_standin import StandInUnavailable  # noqa: E402

STANDINS = ["tensorrt", "modelopt", "torchao", "nvtx", "pynvml", "onnxruntime"]


def test_only_third_party_gpu_packages_are_stood_in():
    top = sorted(p.stem for p in STUBS.iterdir() if not p.name.startswith(("_", ".")) and p.name != "__pycache__")
    assert top == sorted(STANDINS)


@pytest.mark.parametrize("call", [
    lambda: importlib.import_module("tensorrt").Runtime(object()),
    lambda: importlib.import_module("tensorrt").Logger.INFO(),
    lambda: importlib.import_module("modelopt.onnx.quantization").quantize(None),
    lambda: importlib.import_module("torchao.quantization").quantize_(None, None),
    lambda: importlib.import_module("pynvml").nvmlInit(),
], ids=["trt.Runtime", "trt.Logger.INFO", "modelopt.quantize", "torchao.quantize_", "nvmlInit"])
def test_using_a_standin_fails_with_a_message(call):
    with pytest.raises(StandInUnavailable, match="CPU test stand-in"):
        call()


def test_nvtx_annotations_are_no_ops():
    nvtx = importlib.import_module("nvtx.nvtx")

    @nvtx.annotate(message="m", domain="d", color="green")
    def f(x):
        return x + 1

    with nvtx.annotate("block"):
        assert f(1) == 2
