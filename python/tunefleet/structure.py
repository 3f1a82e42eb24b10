"""The aitune block (aitune/SCHEMA.md) and bundle declarations, from AITune's own recorded GraphSpecs.

Everything here reads AITune's objects; nothing recomputes what AITune
decided (graph identity, shape labels, batch multipliers, tensor names).
"""

import math

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

    Only plain tuple/list/dict containers with string keys and JSON-able
    scalar leaves can be rebuilt from Go (SCHEMA.md "output_skeleton");
    anything else is refused here with its path.
    """
    if isinstance(obj, torch.Tensor):
        return None
    if type(obj) is tuple:
        return {"tuple": [skeleton(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
    if type(obj) is list:
        return {"list": [skeleton(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
    if type(obj) is dict:
        for k in obj:
            if not isinstance(k, str):
                raise RecordError(f"{where}: dict key {k!r} is not a string; an AITune checkpoint written by tunefleet can only rebuild string-keyed dicts")
        return {"dict": {k: skeleton(v, f"{where}[{k!r}]") for k, v in obj.items()}}
    if scalar_ok(obj):
        return obj
    kind = type(obj).__qualname__
    raise RecordError(
        f"{where} is a {kind}: outputs must be tensors in plain tuple, list and dict containers "
        f"(with None, bool, int, float or str leaves); AITune's checkpoint needs the real {kind} class to rebuild it. "
        f"Return a tuple or dict of tensors instead"
    )


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
