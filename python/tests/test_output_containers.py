"""Output containers AITune saves by reference to their class: a namedtuple, an OrderedDict and a
ModelOutput-style OrderedDict subclass, recorded, tuned, fetched and loaded with AITune's own code.

AITune's save pickles the module's real output object (torch.save, protocol 2). The checkpoint
tunefleet writes from Go must reference the same classes by module and name and build the same
object: its output_object is compared, as pickled bytes, with the eager output whose tensors are
replaced by None (what AITune's skeleton of it is), and the class reference is found in data.pkl as
the GLOBAL Python writes.
"""

import json
import pickle
import pickletools
import zipfile

import pytest

from conftest import need_aitune
from test_e2e import producer

need_aitune()

import torch  # noqa: E402

import models  # noqa: E402
import pipeline  # noqa: E402
import tunefleet  # noqa: E402
from tunefleet.export import rebuild  # noqa: E402

CASES = [
    # module, class of the output, its skeleton in bundle.json
    (models.NamedTupleOut, models.Pair,
     {"tuple": [None, 3], "class": {"module": "models", "qualname": "Pair"}}),
    (models.OrderedDictOut, __import__("collections").OrderedDict,
     {"dict": {"out": None, "aux": None}, "class": {"module": "collections", "qualname": "OrderedDict"}}),
    (models.ModelOutputOut, models.SegOutput,
     {"dict": {"logits": None, "hidden": None}, "class": {"module": "models", "qualname": "SegOutput"},
      "state": {"dict": {"logits": None, "hidden": None}}}),
    # current transformers: ModelOutput's own __reduce__ passes the fields to the class
    (models.CurrentModelOutputOut, models.DepthOutput,
     {"dict": {"predicted_depth": None, "hidden_states": {"tuple": [None]}},
      "class": {"module": "models", "qualname": "DepthOutput"},
      "state": {"dict": {"predicted_depth": None, "hidden_states": {"tuple": [None]}, "attentions": None}}}),
]


def data_pkl(state_dict_pt):
    with zipfile.ZipFile(state_dict_pt) as z:
        return z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))


def ops(data):
    """The opcodes of a pickle with the memo resolved: a BINGET of a string is the string again, so two
    pickles of equal objects compare equal whether or not equal strings were one object."""
    out, memo, last = [], {}, None
    for op, arg, _ in pickletools.genops(data):
        if op.name in ("BINPUT", "LONG_BINPUT", "PUT", "MEMOIZE"):
            memo[arg if op.name != "MEMOIZE" else len(memo)] = last
            continue
        if op.name in ("BINGET", "LONG_BINGET", "GET"):
            out.append(memo[arg])
            continue
        last = (op.name, arg)
        out.append(last)
    return out


def skeleton_of(obj):
    """The output object with tensors replaced by None: what AITune's save keeps of it."""
    from aitune.torch.module.locator import Locator

    paths = {tuple(k for k, _ in loc._access_path): None for loc, _ in Locator.find_leaves(obj, only_tensors=True)}
    skel = rebuild(obj, (), paths)
    if getattr(skel, "__dict__", None):
        skel.__dict__.update({k: None for k, v in obj.__dict__.items() if isinstance(v, torch.Tensor)})
    return skel


def as_saved(obj):
    """The skeleton pickled as torch.save pickles it (protocol 2)."""
    return ops(pickle.dumps(skeleton_of(obj), protocol=2))


@pytest.mark.parametrize("cls,out_cls,skeleton", CASES, ids=[c[0].__name__ for c in CASES])
def test_output_container_round_trips_through_aitune(tmp_path, cls, out_cls, skeleton):
    bin_ = producer()
    torch.manual_seed(0)
    module = cls().eval()
    name = f"tests.{cls.__name__}"
    calls = [(torch.randn(2, 4),), (torch.randn(5, 4),)]
    if out_cls is models.DepthOutput:
        with pytest.warns(tunefleet.RecordWarning, match=r"comes back from AITune with its fields in another order: "
                          r"\['hidden_states', 'predicted_depth'\] instead of \['predicted_depth', 'hidden_states'\]"):
            bundle = tunefleet.record(module, name, calls, tmp_path / "bundle", producer=bin_)
    else:
        bundle = tunefleet.record(module, name, calls, tmp_path / "bundle", producer=bin_)
    block = json.loads((bundle / "bundle.json").read_text())["aitune"]["graphs"]["0"]
    assert block["output_skeleton"] == skeleton

    ckpt, _, _ = pipeline.tune(bin_, bundle, name, tmp_path)
    go_pkl = data_pkl(ckpt / name / "state_dict.pt")
    ref = f"c{skeleton['class']['module']}\n{skeleton['class']['qualname']}\n".encode()
    assert ref in go_pkl, "the checkpoint does not reference the output class as pickle's GLOBAL does"

    with torch.no_grad():
        eager = module(torch.randn(3, 4))
    state = torch.load(ckpt / name / "state_dict.pt", weights_only=False)
    (_, backend_dict), = state[""]["tuned_module"]["backends"]
    saved = backend_dict["output_object"]
    assert type(saved) is out_cls
    if out_cls is models.DepthOutput:
        # Its own __reduce__ would pickle DepthOutput(None, (None,), None), whose __post_init__ sets
        # hidden_states before predicted_depth: the checkpoint writes DepthOutput(), items, state instead,
        # which gives back the skeleton itself, items in the module's order.
        skel = skeleton_of(eager)
        assert list(saved.items()) == list(skel.items()) and vars(saved) == vars(skel), (list(saved.items()), vars(saved))
        assert list(pickle.loads(pickle.dumps(skel, protocol=2)).keys()) != list(skel.keys()), "Python's own round trip keeps the order now: write it as Python does"
    else:
        want_ops = as_saved(eager)
        assert ops(pickle.dumps(saved, protocol=2)) == want_ops
        # ...and Go wrote those very opcodes into data.pkl (PROTO and STOP aside).
        inner, go_ops = want_ops[1:-1], ops(go_pkl)
        assert any(go_ops[i:i + len(inner)] == inner for i in range(len(go_ops))), "output_object's opcodes differ from Python's"

    # AITune loads it, routes a call of an unseen batch size and rebuilds the output from ONNX Runtime's.
    loaded = pipeline.Loaded(cls().eval(), ckpt)
    fed, engine = pipeline.ort_outputs(bin_, loaded.model(0), {"input_x": [3, 4]}, tmp_path / "ort")
    got = loaded.call(0, (fed["input_x"],), {}, fed, engine)
    with torch.no_grad():
        want = module(fed["input_x"])
    # AITune's Locator.set_value rebuilds a tuple as a plain tuple (its own save does the same).
    assert type(got) is (tuple if issubclass(out_cls, tuple) else out_cls)
    if out_cls is models.DepthOutput:
        # by name right, in the order the record warned about
        assert list(got.keys()) == ["hidden_states", "predicted_depth"]
        got = models.DepthOutput(predicted_depth=got.predicted_depth, hidden_states=got.hidden_states)
    assert pipeline.max_abs_err(got, want) < 1e-5
    if out_cls is models.SegOutput:
        torch.testing.assert_close(got.logits, want.logits)  # the attribute follows the item, as in a ModelOutput
    if out_cls is models.DepthOutput:
        torch.testing.assert_close(got.predicted_depth, want.predicted_depth)
        torch.testing.assert_close(got.hidden_states[0], want.hidden_states[0])
        assert got.attentions is None


def test_classes_a_checkpoint_cannot_reference_are_refused(tmp_path):
    import collections

    class Local(collections.OrderedDict):
        pass

    class M(torch.nn.Module):
        def forward(self, x):
            return Local(y=x + 1)

    with pytest.raises(tunefleet.RecordError, match=r"output is a .*Local, defined inside a class or function: .*define Local at module level"):
        tunefleet.record(M(), "tests.Local", [(torch.randn(2, 3),)], tmp_path / "b", producer=False)
