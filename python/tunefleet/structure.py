"""The aitune block (aitune/SCHEMA.md) and bundle declarations, from AITune's own recorded GraphSpecs.

Everything here reads AITune's objects; nothing recomputes what AITune
decided (graph identity, shape labels, batch multipliers, tensor names).
"""

import math
from collections import OrderedDict

import torch

from tunefleet.errors import RecordError
from tunefleet.tensors import dtype_name

TYPES = {0: "SEQUENCE", 1: "DICT", 2: "DATACLASS", 3: "USER_TYPE"}


def locator_path(locator):
    return [[key, TYPES[int(t)]] for key, t in locator._access_path]


def scalar_ok(v):
    if v is None or isinstance(v, (bool, str)):
        return True
    if isinstance(v, int):
        return True
    return isinstance(v, float) and math.isfinite(v)


def skeleton(obj, where="output"):
    """The output_skeleton of one output object: containers kept, tensors -> None.

    Plain tuple/list/dict containers with string keys and JSON-able scalar
    leaves, as before; and the containers AITune saves by reference to their
    class (SCHEMA.md "output_skeleton"): a namedtuple, an OrderedDict or a
    subclass of it (a ModelOutput) -- each only when its pickled form (its
    __reduce_ex__(2), what torch.save writes) is the one the Go writer
    reproduces. Anything else is refused here with its path.
    """
    if isinstance(obj, torch.Tensor):
        return None
    if type(obj) is tuple:
        return {"tuple": [skeleton(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
    if type(obj) is list:
        return {"list": [skeleton(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
    if type(obj) is dict:
        return {"dict": _items(obj, where)}
    if isinstance(obj, tuple) and hasattr(type(obj), "_fields"):
        return _namedtuple(obj, where)
    if isinstance(obj, OrderedDict):
        return _ordered_dict(obj, where)
    if scalar_ok(obj):
        return obj
    kind = type(obj).__qualname__
    raise RecordError(
        f"{where} is a {kind}: outputs must be tensors in tuple, list, dict, OrderedDict (or a subclass such as "
        f"a ModelOutput) and namedtuple containers, with None, bool, int, float or str leaves; a checkpoint "
        f"written outside Python cannot rebuild a {kind}. Return one of those containers instead"
    )


def _items(d, where):
    for k in d:
        if not isinstance(k, str):
            raise RecordError(f"{where}: dict key {k!r} is not a string; an AITune checkpoint written by tunefleet can only rebuild string-keyed dicts")
    return {k: skeleton(v, f"{where}[{k!r}]") for k, v in d.items()}


def class_ref(cls, where):
    """{"module", "qualname"} of a class pickle can reference by name, as torch.save's pickle (protocol 2) does."""
    import importlib

    module, qualname = cls.__module__, cls.__qualname__
    if "." in qualname or "<" in qualname:
        raise RecordError(f"{where} is a {qualname}, defined inside a class or function: AITune's checkpoint pickles "
                          f"an output's class by module and name, so define {cls.__name__} at module level")
    if module == "__main__":
        raise RecordError(f"{where} is a {qualname} from the __main__ script: the checkpoint references it as "
                          f"__main__.{qualname}, which a loading process cannot import; define it in a module")
    try:
        found = getattr(importlib.import_module(module), qualname)
    except (ImportError, AttributeError):
        found = None
    if found is not cls:
        raise RecordError(f"{where} is a {module}.{qualname}, but importing {module} does not give that class "
                          f"back; pickle (and so AITune's checkpoint) needs it importable by that name")
    return {"module": module, "qualname": qualname}


def _namedtuple(obj, where):
    import copyreg

    rv = obj.__reduce_ex__(2)
    if not (len(rv) >= 2 and rv[0] is copyreg.__newobj__ and rv[1][0] is type(obj) and tuple(rv[1][1:]) == tuple(obj)
            and (len(rv) < 3 or rv[2] is None)):
        raise RecordError(f"{where} is a {type(obj).__qualname__} whose pickled form is not a namedtuple's "
                          f"(it overrides __reduce__ or holds attributes); return a plain namedtuple or a tuple")
    return {"tuple": [skeleton(v, f"{where}[{i}]") for i, v in enumerate(obj)], "class": class_ref(type(obj), where)}


def _field_args(obj, args):
    """args are obj's dataclass field values in field order (what a current transformers ModelOutput's
    __reduce__ passes to its class), each the very object the field holds."""
    import dataclasses

    if not dataclasses.is_dataclass(obj) or not isinstance(args, tuple):
        return False
    fields = dataclasses.fields(obj)
    return len(args) == len(fields) and all(a is getattr(obj, f.name) for a, f in zip(args, fields))


def _check_rebuilt(obj, state, where):
    """A ModelOutput whose __reduce__ passes its fields is written as Class(), items, state: check that gives obj.

    Python's own pickle would call Class(*fields) with the skeleton's fields,
    all None where tensors were, and the class's __post_init__ then sets the
    first non-None field before the others: the loaded output's items would
    come in another order than the module returned them (to_tuple() and
    integer indexing would change meaning). Class() sets nothing, so the
    items come back in their recorded order.
    """
    cls = type(obj)
    try:
        again = cls()
        for k, v in obj.items():
            again[k] = v
        if state:
            again.__dict__.update(state)
        same = list(again.items()) == list(obj.items()) and list(vars(again)) == list(vars(obj))
    except Exception as e:
        raise RecordError(f"{where} is a {cls.__qualname__} that cannot be built empty ({type(e).__name__}: {str(e)[:200]}): "
                          f"the checkpoint rebuilds an output as {cls.__name__}(), then its items; give every "
                          f"field a default (as transformers' ModelOutputs do)") from e
    if not same:
        raise RecordError(f"{where} is a {cls.__qualname__} that {cls.__name__}() followed by its items and attributes "
                          f"does not rebuild (its items or attributes come out differently); the checkpoint rebuilds "
                          f"outputs that way. Return an OrderedDict or a dict")
    # AITune's backends answer each call with copy.deepcopy(output_object), whose tensors are None
    # in a checkpoint; the class's own __reduce__ then runs __post_init__ over None fields.
    import copy
    import warnings

    from tunefleet.errors import RecordWarning

    skel = cls()
    for k, v in obj.items():
        skel[k] = _none_tensors(v)
    skel.__dict__.update({k: _none_tensors(v) for k, v in vars(obj).items()})
    order = list(copy.deepcopy(skel).keys())
    if order != list(obj.keys()):
        warnings.warn(RecordWarning(
            f"{where} is a {cls.__qualname__} that comes back from AITune with its fields in another order: "
            f"{order} instead of {list(obj.keys())}. AITune copies the saved output for each call, and the class's "
            f"__post_init__ sets fields in that order when the first one is empty; names (out.{order[0]}, "
            f"out[{order[0]!r}]) are right, integer indexing and to_tuple() are not. Read the output by name, or "
            f"return a tuple (return_dict=False)"), stacklevel=2)


def _none_tensors(v):
    if isinstance(v, torch.Tensor):
        return None
    if type(v) in (tuple, list):
        return type(v)(_none_tensors(x) for x in v)
    if type(v) is dict:
        return {k: _none_tensors(x) for k, x in v.items()}
    return v


def _ordered_dict(obj, where):
    rv = obj.__reduce__()
    state = rv[2] if len(rv) > 2 else None
    args = rv[1] if len(rv) > 1 else None
    if not (rv[0] is type(obj) and (args == () or _field_args(obj, args)) and (len(rv) < 4 or rv[3] is None)
            and (state is None or type(state) is dict)):
        raise RecordError(f"{where} is a {type(obj).__qualname__} whose pickled form is neither an OrderedDict's "
                          f"nor a ModelOutput's (its __reduce__ passes constructor arguments other than its dataclass "
                          f"fields, or extra state); AITune's checkpoint could not be written outside Python. Return "
                          f"an OrderedDict, a dict or a dataclass OrderedDict subclass (a ModelOutput)")
    if args:
        _check_rebuilt(obj, state, where)
    out = {"dict": _items(obj, where), "class": class_ref(type(obj), where)}
    if state:
        # The instance's attributes (a ModelOutput keeps each field as one): tensors among them
        # are the output's own, set again by AITune through the items.
        out["state"] = {"dict": _items(state, f"{where}.__dict__")}
    return out


def tensor_entries(metadata, prefix):
    from aitune.torch.utils.tensor import format_tensor_name

    out = []
    for loc, spec in metadata.tensor_data:
        out.append({
            "name": format_tensor_name(loc.path, prefix),
            "path": locator_path(loc),
            "bs_multipliers": [None if isinstance(m, float) and math.isnan(m) else m for m in spec._bs_multipliers],
        })
    return out


def tensor_decls(metadata, prefix):
    """bundle.json inputs/outputs for one graph: AITune's TensorSpecs as they are."""
    from aitune.torch.utils.tensor import format_tensor_name

    decls = []
    for loc, spec in metadata.tensor_data:
        name = format_tensor_name(loc.path, prefix)
        dt = dtype_name(spec.dtype)
        if dt is None:
            raise RecordError(f"{prefix} {name}: dtype {spec.dtype} has no ONNX/bundle equivalent; cast it in forward")
        decls.append({"name": name, "dtype": dt, "shape": list(spec.shape),
                      "min_shape": list(spec.min_shape), "max_shape": list(spec.max_shape)})
    return decls


def other_inputs(metadata):
    entries = []
    for loc, value in metadata.other_data:
        if not scalar_ok(value):
            raise RecordError(
                f"argument {loc.display_path} is a {type(value).__qualname__}: "
                f"non-tensor arguments are routing keys and must be None, bool, int, finite float or str"
            )
        entries.append({"path": locator_path(loc), "value": value})
    return entries


def graph_block(spec, output_object):
    return {
        "graph_spec_name": spec.name,
        "strict": bool(spec.input_spec._strict),
        "llm_phase": spec.input_spec._llm_phase,
        "inputs": tensor_entries(spec.input_spec, "input"),
        "other_inputs": other_inputs(spec.input_spec),
        "outputs": tensor_entries(spec.output_spec, "output"),
        "output_skeleton": skeleton(output_object),
    }


def module_versions(module):
    """{submodule prefix: _version} of module.state_dict()'s _metadata, "" for the module itself.

    The checkpoint's state dict carries them (SCHEMA.md "module_versions"):
    AITune's loader hands that state dict to torch's load_state_dict, which
    gives each submodule its version, and some modules refuse to load without
    one (torchvision's MNASNet: "version shluld be set to 1 or 2").
    """
    meta = getattr(module.state_dict(keep_vars=True), "_metadata", None) or {}
    return {k: v["version"] for k, v in meta.items()
            if isinstance(v, dict) and type(v.get("version")) is int and v["version"] >= 0}


def check_loadable(module, versions):
    """Do what AITune's loader does last, on the recorded module: load_state_dict of what is left of the state dict.

    ait.load takes its own entry out of the checkpoint's state dict and calls
    module.load_state_dict(rest, strict=False). AITune 0.6's storage returns
    that state dict as a plain dict, so the submodules' versions (_metadata)
    torch.save kept are dropped on the way; tunefleet.load hands them back
    (load.py). A module that cannot load even with its versions fails every
    deploy: the record fails now. One that needs its versions loads with
    tunefleet.load only, which the user is told. Nothing of the module
    changes: the state dict holds no tensor.
    """
    import warnings

    from tunefleet.errors import RecordWarning

    try:
        module.load_state_dict({}, strict=False)
        return
    except Exception as e:
        plain = e
    sd = OrderedDict()
    sd._metadata = OrderedDict((k, {"version": v}) for k, v in versions.items())
    cls = type(module).__qualname__
    try:
        module.load_state_dict(sd, strict=False)
    except Exception as e:
        raise RecordError(
            f"AITune's loader could not rebuild {cls} from the checkpoint this recording would give: load_state_dict "
            f"raised {type(e).__name__}: {str(e)[:400]}; ait.load calls module.load_state_dict(state, strict=False) "
            f"with no tensors of the tuned module, so the module must load from that"
        ) from e
    warnings.warn(RecordWarning(
        f"{cls} loads with tunefleet.load only, not with a bare ait.load: without the submodules' versions "
        f"(state_dict()._metadata, which AITune's storage drops) load_state_dict raises {type(plain).__name__}: "
        f"{str(plain)[:200]}. tunefleet.load passes the module's own versions; to use ait.load, make the module "
        f"load without one (e.g. override _load_from_state_dict to default local_metadata's version)"), stacklevel=5)


def bundle_dynamic_shapes(dynamic_shapes):
    """Module dynamic_shapes (keyed by forward path) -> bundle.json's (keyed by ONNX input name)."""
    from aitune.torch.dynamic_shapes import BatchDim
    from aitune.torch.utils.tensor import format_tensor_name

    if not dynamic_shapes:
        return None
    out = {}
    for path, dims in dynamic_shapes.items():
        entry = []
        for d in dims:
            if isinstance(d, int):
                entry.append(d)
                continue
            dim = {"name": d.name, "min": d.min, "max": d.max}
            if d.opt is not None:
                dim["opt"] = d.opt
            if isinstance(d, BatchDim):
                dim["batch"] = True
            entry.append(dim)
        out[format_tensor_name(path, "input")] = entry
    return out
