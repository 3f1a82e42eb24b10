"""Oracle tier: the Go-written goldens read by AITune's own code.

Every golden in aitune/testdata/golden goes through AITune's LocalTorchStorage
load tasks (unzip, sha sums, torch.load, relocation), TunedModule.from_dict,
to_dict() re-serialization, call routing and output rebuilding. The goldens'
engines are placeholder bytes, so no backend is deployed here (TensorRT's
deploy starts with torch.cuda.set_device, which a CPU cannot pass); the
end-to-end test deploys a real ONNX Runtime checkpoint.
"""

import shutil

import pytest

from conftest import REPO, need_aitune

need_aitune()

import torch  # noqa: E402
from torch import nn  # noqa: E402

import aitune.torch as ait  # noqa: E402
from aitune.torch import LocalTorchStorage  # noqa: E402
from aitune.torch.backend.onnx_runtime_backend import ONNXRuntimeBackend  # noqa: E402
from aitune.torch.backend.tensorrt.tensorrt_backend import TensorRTBackend  # noqa: E402
from aitune.torch.module.tuned_module import TunedModule  # noqa: E402

from aitune_cpu import EngineCalls, canon, run_engine_on_cpu  # noqa: E402

GOLDEN = REPO / "aitune" / "testdata" / "golden"


class TwoHeads(nn.Module):
    """aitunetest.TRT2's module."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(3, 10)

    def forward(self, x, mask=None, *, return_dict=False):
        pooled = x.mean(dim=(2, 3))
        hidden = pooled[:, None, :1].expand(-1, 4, 16).to(torch.float16)
        return {"logits": self.head(pooled), "hidden": (hidden, 3)}


class Encoder(nn.Module):
    """aitunetest.ORT1's module (options = {"mask": t})."""

    def forward(self, input_ids, options):
        emb = (input_ids * options["mask"]).to(torch.float16)
        return emb[:, :, None].expand(-1, -1, 16)


GOLDENS = [
    # dir, checkpoint name, compressed, module, backend types in graph order
    ("trt2", "two_heads.v1", True, TwoHeads, [TensorRTBackend, TensorRTBackend]),
    ("ort1", "encoder", False, Encoder, [ONNXRuntimeBackend]),
]


def test_every_golden_is_covered():
    assert sorted(p.name for p in GOLDEN.iterdir()) == sorted(g[0] for g in GOLDENS)


def load_golden(tmp_path, folder, name, compressed):
    """AITune's LocalTorchStorage load tasks on a scratch copy of the golden."""
    base = tmp_path / folder
    shutil.copytree(GOLDEN / folder, base)
    if compressed:
        shutil.rmtree(base / name)  # the .ait archive alone must be enough
    return base, LocalTorchStorage(base_folder=base, compress_checkpoint=compressed).load(name)


@pytest.mark.parametrize("folder,name,compressed,cls,backends", GOLDENS, ids=[g[0] for g in GOLDENS])
def test_golden_loads_with_aitune(tmp_path, folder, name, compressed, cls, backends):
    base, state = load_golden(tmp_path, folder, name, compressed)
    assert list(state) == [""]
    module_dict = state[""]
    assert ait.Module.is_state_dict_valid(module_dict)
    tuned = TunedModule.from_dict(cls(), module_dict["tuned_module"])
    got = list(tuned.backends.values())
    assert [type(b) for b in got] == backends
    for b in got:
        for artifact in [v for v in vars(b).values() if type(v).__name__ == "ArtifactPath"]:
            assert artifact.root == (base / name).resolve(), artifact
            assert artifact.path.is_file(), artifact
    # to_dict() gives back what was loaded (relocated artifact roots aside).
    assert canon(tuned.to_dict()) == canon(module_dict["tuned_module"])


def engine_of(eager):
    """Engine outputs by AITune's tensor names, computed by the eager module."""

    def run(names_to_inputs, call):
        out = eager(*call[0], **call[1])
        flat = {}
        if isinstance(out, dict):
            flat["output_logits"] = out["logits"]
            flat["output_hidden_0"] = out["hidden"][0]
        else:
            flat["output"] = out
        return flat

    return run


def test_trt2_routes_calls_and_picks_profiles(tmp_path):
    _, state = load_golden(tmp_path, "trt2", "two_heads.v1", True)
    torch.manual_seed(0)
    eager = TwoHeads()
    tuned = TunedModule.from_dict(TwoHeads(), state[""]["tuned_module"])
    # Module.from_dict stops at deploy on a CPU: TensorRT's first step there is torch.cuda.set_device.
    with pytest.raises(Exception) as stopped:
        ait.Module.from_dict(TwoHeads(), state[""])
    assert stopped.traceback[-1].path.parts[-2:] == ("cuda", "__init__.py"), stopped.getrepr(style="short")

    seen = EngineCalls()
    current = {}
    for graph_name, backend in zip(["0", "1"], tuned.backends.values()):
        assert backend._graph_spec.name == graph_name
        run_engine_on_cpu(backend, graph_name, lambda inputs: engine_of(eager)(inputs, current["call"]), seen)
    # One profile per graph, derived from dynamic_shapes as AITune derives it (aitune.Write refuses
    # profiles that contradict them): nothing to select, and any size inside 8..32 routes.
    assert [len(b._trt_optimization_profiles) for b in tuned.backends.values()] == [1, 1]

    x2, x16 = torch.randn(2, 3, 8, 8), torch.randn(16, 3, 8, 8)
    calls = [
        # (args, kwargs), graph, TensorRT profile (None: single profile, nothing to select)
        (((x2, torch.ones(2, 8, dtype=torch.int64)), {}), "0", None),
        (((x16,), {"mask": torch.ones(16, 8, dtype=torch.int64)}), "0", None),
        # 16x16 images: inside dynamic_shapes' 8..32. The golden's old two 8x8 profiles refused this
        # call ("No TensorRT optimization profile matches the input shapes").
        (((torch.randn(4, 3, 16, 16), torch.ones(4, 8, dtype=torch.int64)), {}), "0", None),
        (((torch.randn(4, 3, 16, 16),), {"return_dict": True}), "1", None),
    ]
    for call, graph, profile in calls:
        current["call"] = call
        got = tuned(*call[0], **call[1])
        want = eager(*call[0], **call[1])
        assert seen.calls[-1][0] == graph and seen.calls[-1][2] == profile, (graph, seen.calls[-1])
        assert set(got) == {"logits", "hidden"} and got["hidden"][1] == 3
        assert isinstance(got["hidden"], tuple)
        torch.testing.assert_close(got["logits"], want["logits"])
        torch.testing.assert_close(got["hidden"][0], want["hidden"][0])
    # A call no recorded graph has: AITune's own routing refuses it.
    with pytest.raises(RuntimeError, match="No backend found"):
        tuned(x2, return_dict=False)


def test_ort1_routes_and_rebuilds_a_bare_output(tmp_path):
    _, state = load_golden(tmp_path, "ort1", "encoder", False)
    eager = Encoder()
    tuned = TunedModule.from_dict(Encoder(), state[""]["tuned_module"])
    (backend,) = tuned.backends.values()
    assert backend._onnx_data_artifact is not None and backend._onnx_data_artifact.path.is_file()
    assert backend._config.execution_provider.value == "tensorrt"
    assert backend._device == torch.device("cuda", 1)
    seen = EngineCalls()
    current = {}
    run_engine_on_cpu(backend, "0", lambda inputs: engine_of(eager)(inputs, current["call"]), seen)
    ids = torch.arange(12).reshape(3, 4)
    for kwargs_form in (False, True):
        mask = {"mask": torch.ones(3, 4, dtype=torch.int64)}
        current["call"] = ((ids, mask), {})
        got = tuned(input_ids=ids, options=mask) if kwargs_form else tuned(ids, mask)
        assert sorted(seen.calls[-1][1]) == ["input_input_ids", "input_options_mask"]
        torch.testing.assert_close(got, eager(ids, mask))
