"""What the recorder checks before a bundle ships (issue 32): sizes the tracer baked in, modules AITune's
loader cannot rebuild, forms recorded from one call. Each with Debian's torch, AITune's real recording
and loading code, and `producer bundle check` (ONNX Runtime) as a worker would run it."""

import json
import warnings

import pytest

from conftest import need_aitune
from test_record import producer_or_skip

need_aitune()

import torch  # noqa: E402

import pipeline  # noqa: E402
import tunefleet  # noqa: E402
from tunefleet.errors import RecordWarning  # noqa: E402


class BakedRemainder(torch.nn.Module):
    """Adds (length mod 4), read as a Python number: the tracer fixes it to the traced call's value.
    Calls of length 4 and 8 both give 0, so every recorded call reproduces; length 7 does not."""

    def forward(self, x):
        return x + int(x.shape[1]) % 4  # the baked line


class Symbolic(torch.nn.Module):
    """The same model written with tensor operations: right at every length."""

    def forward(self, x):
        n = torch.tensor(x.shape[1]) if not torch.jit.is_tracing() else x.new_tensor(x.shape[1])
        return x + torch.remainder(n, 4).to(x.dtype)


def baked_calls():
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(2, 4, generator=g),), (torch.randn(2, 8, generator=g),)]


def test_a_size_baked_into_the_graph_is_caught_at_an_unrecorded_size(tmp_path):
    bin_ = producer_or_skip()
    with pytest.raises(tunefleet.RecordError) as e:
        tunefleet.record(BakedRemainder(), "tests.Baked", baked_calls(), tmp_path / "bundle", producer=bin_)
    msg = str(e.value)
    # the axis, the size, the range, the recorded sizes and the line the tracer warned about
    assert "dim1=7" in msg and "input_x axis 1" in msg and "4..8" in msg and "recorded: 4, 8" in msg, msg
    line = BakedRemainder.forward.__code__.co_firstlineno + 1
    assert f"test_record_checks.py:{line}" in msg, msg
    assert not (tmp_path / "bundle").exists() and not list(tmp_path.iterdir()), list(tmp_path.iterdir())


def test_a_graph_right_at_every_size_passes_the_probe(tmp_path):
    bin_ = producer_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecordWarning)
        out = tunefleet.record(torch.nn.Sequential(torch.nn.Linear(4, 3)), "tests.Linear",
                               [(torch.randn(1, 4),), (torch.randn(5, 4),)], tmp_path / "bundle", producer=bin_)
    # the probe's own bundle is gone; the recorded one holds the recorded calls only
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]
    assert json.loads((out / "bundle.json").read_text())["graphs"][0]["samples"] == ["graphs/0/samples/0", "graphs/0/samples/1"]


class NeedsVersion(torch.nn.Module):
    """Like torchvision's MNASNet: refuses to load without its state dict version."""

    _version = 2

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.lin(x)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        if local_metadata.get("version") not in (1, 2):
            raise ValueError(f"version must be 1 or 2, not {local_metadata.get('version')}")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing, unexpected, errors)


class NeverLoads(NeedsVersion):
    def _load_from_state_dict(self, *a):
        raise RuntimeError("this module has no loader")


def test_a_module_that_needs_its_version_records_with_a_warning_and_loads(tmp_path):
    bin_ = producer_or_skip()
    torch.manual_seed(0)
    module = NeedsVersion().eval()
    calls = [(torch.randn(1, 4),), (torch.randn(3, 4),)]
    with pytest.warns(RecordWarning, match="loads with tunefleet.load only"):
        bundle = tunefleet.record(module, "tests.NeedsVersion", calls, tmp_path / "bundle", producer=bin_)
    block = json.loads((bundle / "bundle.json").read_text())["aitune"]
    assert block["module_versions"] == {"": 2, "lin": 1}
    ckpt, _, _ = pipeline.tune(bin_, bundle, "tests.NeedsVersion", tmp_path)
    # a bare ait.load refuses it (AITune's storage drops the versions), tunefleet.load gives them back
    import aitune.torch as ait
    from aitune.torch import LocalTorchStorage
    with pytest.raises(ValueError, match="version must be 1 or 2, not None"):
        ait.load(NeedsVersion(), "tests.NeedsVersion", storage=LocalTorchStorage(base_folder=ckpt, compress_checkpoint=True))
    fresh = NeedsVersion()
    loaded = pipeline.Loaded(fresh, ckpt)
    assert loaded.module._self_wrapper is not None
    assert "load_state_dict" not in fresh.__dict__  # the override is gone again


def test_a_module_aitune_cannot_rebuild_is_refused_at_record(tmp_path):
    with pytest.raises(tunefleet.RecordError, match="AITune's loader could not rebuild NeverLoads.*this module has no loader"):
        tunefleet.record(NeverLoads(), "tests.NeverLoads", [(torch.randn(1, 4),), (torch.randn(2, 4),)],
                         tmp_path / "bundle", producer=False)
    assert not list(tmp_path.iterdir())


def test_a_form_from_one_call_warns_that_its_shapes_are_fixed(tmp_path):
    with pytest.warns(RecordWarning, match=r"recorded from one call \(calls\[0\]\): its shapes are fixed, batch included \(input_input \[2, 4\]\)"):
        tunefleet.record(torch.nn.Linear(4, 3), "tests.OneCall", [(torch.randn(2, 4),)], tmp_path / "bundle", producer=False)


class TwoLengths(torch.nn.Module):
    def forward(self, a, b, scale=1.0, mask=None):
        return a.sum(1) * scale + b.sum(1)


def test_explicit_defaults_are_the_same_call_as_omitted_ones(tmp_path):
    calls = [tunefleet.Call((torch.randn(2, 3), torch.randn(2, 5))),
             tunefleet.Call((torch.randn(2, 4), torch.randn(2, 9)), {"scale": 1.0, "mask": None}),
             tunefleet.Call((torch.randn(2, 6), torch.randn(2, 7), 1.0))]
    out = tunefleet.record(TwoLengths(), "tests.Defaults", calls, tmp_path / "bundle", producer=False)
    m = json.loads((out / "bundle.json").read_text())
    assert len(m["graphs"]) == 1 and len(m["graphs"][0]["samples"]) == 3, m["graphs"]
    # a value other than the default is another graph, as AITune routes it
    calls.append(tunefleet.Call((torch.randn(2, 3), torch.randn(2, 5)), {"scale": 2.0}))
    out = tunefleet.record(TwoLengths(), "tests.Defaults", calls, tmp_path / "bundle2", producer=False)
    assert len(json.loads((out / "bundle.json").read_text())["graphs"]) == 2


class MaskedAssign(torch.nn.Module):
    """wav2vec2/HuBERT's padding in miniature: x[mask] = 0 with a mask from lengths."""

    def forward(self, x, lengths):
        mask = torch.arange(x.shape[1])[None, :] >= lengths[:, None]
        x = x.clone()
        x[mask] = 0
        return x


class MaskedWhere(torch.nn.Module):
    """The same, written as the hint says."""

    def forward(self, x, lengths):
        mask = torch.arange(x.shape[1])[None, :] >= lengths[:, None]
        return torch.where(mask[..., None], torch.zeros((), dtype=x.dtype), x)


def masked_calls():
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(2, 5, 4, generator=g), torch.tensor([5, 3])), (torch.randn(3, 7, 4, generator=g), torch.tensor([7, 2, 4]))]


def test_a_masked_assignment_gets_the_hint_that_fits_and_the_hint_works(tmp_path):
    bin_ = producer_or_skip()
    with pytest.raises(tunefleet.RecordError, match=r"Where node .*x\[mask\] = v.*torch\.where\(mask\[\.\.\., None\], v, x\)") as e:
        tunefleet.record(MaskedAssign(), "tests.Masked", masked_calls(), tmp_path / "bundle", producer=bin_)
    assert "randomness" not in str(e.value)  # not the generic guess
    tunefleet.record(MaskedWhere(), "tests.Masked", masked_calls(), tmp_path / "bundle", producer=bin_)


def test_data_dependent_output_sizes_say_to_record_without_post_processing(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    from tunefleet.record import _cause_from_graph

    boxes = helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 4, 4])
    scores = helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, 4])
    keep = helper.make_tensor_value_info("keep", TensorProto.INT64, ["n", 3])
    graph = helper.make_graph([helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["keep"])], "nms", [boxes, scores], [keep])
    (tmp_path / "graphs" / "0").mkdir(parents=True)
    onnx.save(helper.make_model(graph), str(tmp_path / "graphs" / "0" / "model.onnx"))
    cause = _cause_from_graph(tmp_path, 0, None)
    assert "size depends on the data (NonMaxSuppression)" in cause and "record the network without it" in cause, cause
    (tmp_path / "graphs" / "1").mkdir()
    graph = helper.make_graph([helper.make_node("Relu", ["boxes"], ["y"])], "relu", [boxes],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4])])
    onnx.save(helper.make_model(graph), str(tmp_path / "graphs" / "1" / "model.onnx"))
    assert _cause_from_graph(tmp_path, 1, None) == ""
