"""ONNX export of one recorded graph spec with torch.onnx.export's trace exporter.

Tensor names are AITune's (`format_tensor_name`), dynamic axes are those
AITune's own trace exporter (`ONNXExporter._create_dynamic_axes`) derives from
the graph spec, so the ONNX graph binds exactly as AITune's TensorRT and ONNX
Runtime backends bind theirs.

The export runs with gradients enabled, as AITune's exporter does (its
backends export outside any no_grad block): under no_grad torch sends
nn.TransformerEncoderLayer and nn.MultiheadAttention down fused fast paths
(`aten::_transformer_encoder_layer_fwd`, nested tensors for padding masks)
that the ONNX exporter cannot export. The recorder computes its reference
outputs in the same mode (record.py), so graph and references are one
function.
"""

import contextlib
import copy
import dataclasses
import inspect
import warnings
from collections import UserDict
from pathlib import Path

import onnx
import torch

from tunefleet.errors import RecordError

_EXPORT_PARAMS = inspect.signature(torch.onnx.export).parameters

#: the protobuf limit: a model whose serialized size may reach it is written with external data
PROTO_LIMIT = 2**31 - 1


def _kind(obj):
    """The ObjectType AITune's Locator walks obj as (None: a leaf)."""
    t = type(obj)
    if issubclass(t, (list, tuple)):
        return "SEQUENCE"
    if issubclass(t, (dict, UserDict)):
        return "DICT"
    if dataclasses.is_dataclass(t):
        return "DATACLASS"
    return None


def rebuild(obj, path, leaves):
    """obj with the tensor at each access path in `leaves` ({path tuple: tensor}) replaced.

    Containers keep their type (a namedtuple stays one, an OrderedDict too),
    so the module's forward sees what it was called with; the walk is
    AITune's Locator walk (sequences by index, dicts by key, dataclasses by
    field).
    """
    if path in leaves:
        return leaves[path]
    kind = _kind(obj)
    if kind == "SEQUENCE":
        items = [rebuild(v, path + (i,), leaves) for i, v in enumerate(obj)]
        if isinstance(obj, tuple) and hasattr(type(obj), "_fields"):
            return type(obj)(*items)
        return type(obj)(items)
    if kind == "DICT":
        out = copy.copy(obj)
        for k, v in obj.items():
            out[k] = rebuild(v, path + (k,), leaves)
        return out
    if kind == "DATACLASS":
        out = copy.copy(obj)
        for f in dataclasses.fields(obj):
            object.__setattr__(out, f.name, rebuild(getattr(obj, f.name), path + (f.name,), leaves))
        return out
    return obj


class _CallWithConstants(torch.nn.Module):
    """module called as the recorded call, taking the call's tensor leaves as flat inputs.

    The traced inputs are exactly the tensors of AITune's input spec, in its
    order (one ONNX input each, named as AITune names them); everything else
    (None, flags, strings, a dict's non-tensor values) is a constant of this
    graph, which AITune keys the graph on in strict mode. Arguments are bound
    by AITune's ForwardSignature and passed back as inspect.BoundArguments
    args/kwargs, so `forward(x, *rest)`, `**kwargs`, keyword-only parameters
    and a trailing dict argument reach forward as the user passed them (the
    trace exporter would otherwise read a trailing dict as keyword arguments).
    """

    def __init__(self, module, bound, paths, output_locators):
        super().__init__()
        self.module = module
        self.bound = bound
        self.paths = paths
        self.output_locators = output_locators

    @classmethod
    def of(cls, module, spec, sample):
        args, kwargs = sample
        bound = spec.forward_signature.normalize(args, kwargs)
        locs = [loc for loc, _ in spec.input_spec.tensor_data]
        paths = [tuple(k for k, _ in loc._access_path) for loc in locs]
        traced = tuple(loc.get_value(bound.arguments) for loc in locs)
        outputs = [loc for loc, _ in spec.output_spec.tensor_data]
        call = cls(module, bound, paths, outputs)
        # torch.onnx.export puts the wrapper (and so the module) in eval mode and
        # then back in the wrapper's mode: the wrapper takes the module's.
        call.train(module.training)
        return call, traced

    def forward(self, *traced):
        arguments = rebuild(dict(self.bound.arguments), (), dict(zip(self.paths, traced)))
        bound = inspect.BoundArguments(self.bound.signature, arguments)
        out = self.module(*bound.args, **bound.kwargs)
        # Only the tensor leaves, in AITune's output-spec order: the ONNX
        # outputs then line up with output_names whatever the containers.
        return tuple(loc.get_value(out) for loc in self.output_locators)


def _param_bytes(module):
    seen, total = set(), 0
    for t in list(module.parameters()) + list(module.buffers()):
        if t.data_ptr() in seen:
            continue
        seen.add(t.data_ptr())
        total += t.numel() * t.element_size()
    return total


def export_graph(module, spec, sample, path):
    """Export `module` called as `sample` (normalized args, kwargs) to `path`; returns the tracer's warnings (tracer_lines).

    A model whose weights approach protobuf's 2 GB limit is written with
    external data, gathered into one `<path>.data` file; it is then checked
    by path (onnx.checker reads it from disk), never loaded whole.
    """
    from aitune.torch.libs.onnx.onnx_exporter import ONNXExporter
    from aitune.torch.utils.tensor import format_tensor_name

    path = Path(path)
    input_names = [format_tensor_name(loc.path, "input") for loc, _ in spec.input_spec.tensor_data]
    output_names = [format_tensor_name(loc.path, "output") for loc, _ in spec.output_spec.tensor_data]
    dynamic_axes = dict(ONNXExporter(output_path=path, use_dynamo=False)._create_dynamic_axes(spec))
    call, traced = _CallWithConstants.of(module, spec, sample)
    extra = {"dynamo": False} if "dynamo" in _EXPORT_PARAMS else {}
    modes = {m: m.training for m in module.modules()}
    large = _param_bytes(module) > PROTO_LIMIT // 2
    if large and "external_data" in _EXPORT_PARAMS:
        extra["external_data"] = True
    # torch's own fast-path checks read the grad mode; AITune exports with it on.
    caught = []

    def export(**more):
        nonlocal caught
        with torch.enable_grad(), warnings.catch_warnings(record=True) as caught:
            # Kept, not shown: unnamed dynamic axes and the like are not the user's business;
            # the tracer's warnings are (tracer_lines), once a probe shows they matter.
            warnings.simplefilter("always")
            torch.onnx.export(call, traced, str(path), input_names=input_names, output_names=output_names,
                              dynamic_axes=dynamic_axes, **extra, **more)

    try:
        try:
            export()
        except Exception as e:
            _export_again(export, e, spec.name)
    except RecordError:
        _restore(modes)
        raise
    except Exception as e:
        _restore(modes)
        raise RecordError(f"graph {spec.name}: torch.onnx.export failed: {type(e).__name__}: {_short(e)}") from e
    _restore(modes)
    try:
        model = onnx.load(str(path), load_external_data=False)
        if _has_external(model):
            model = _gather_external(model, path)
        onnx.checker.check_model(str(path))
    except RecordError:
        raise
    except Exception as e:
        raise RecordError(f"graph {spec.name}: the exported ONNX graph does not pass onnx.checker: {type(e).__name__}: {_short(e)}") from e
    init = {i.name for i in model.graph.initializer}
    got_in = [v.name for v in model.graph.input if v.name not in init]
    got_out = [v.name for v in model.graph.output]
    if got_in != input_names:
        missing = [n for n in input_names if n not in got_in]
        if missing and [n for n in input_names if n in got_in] == got_in:
            _keep_unused_inputs(model, path, spec, input_names)
        else:
            raise RecordError(f"graph {spec.name}: the exported ONNX graph has inputs {got_in}, AITune recorded {input_names}")
    if got_out != output_names:
        raise RecordError(f"graph {spec.name}: the exported ONNX graph has outputs {got_out}, AITune recorded {output_names} "
                          f"(an output that is an input returned unchanged, or the same tensor returned twice, cannot be exported)")
    return tracer_lines(caught)


def tracer_lines(caught):
    """"file.py:123: message" of each distinct torch.jit.TracerWarning among caught warnings, in order.

    The tracer warns where a value of the traced call is fixed into the graph
    (a tensor turned into a Python number, a branch on one); the warning's
    file and line are the module's own source.
    """
    torch_dir = str(Path(torch.__file__).parent)
    own, torchs = [], []
    for w in caught:
        if not issubclass(w.category, torch.jit.TracerWarning):
            continue
        text = " ".join(str(w.message).split())
        first = text.split(". ")[0].rstrip(".")[:160]
        line = f"{Path(w.filename).name}:{w.lineno}: {first}"
        bucket = torchs if w.filename.startswith(torch_dir) else own
        if line not in bucket:
            bucket.append(line)
    # torch's own lines (functional.py) are where a module's call landed, not what to fix.
    return own or torchs


def _export_again(export, e, graph):
    """After export() failed with e: export again where torch can, else raise.

    An operator no opset of this torch exports but one ONNX operator computes
    is given its symbolic for this export only (_SYMBOLICS); one the default
    opset lacks and a newer one has (grid_sample: 16) is exported at the
    newest opset, which TensorRT and ONNX Runtime read too (the graph records
    the opset it used).
    """
    op = _unsupported_op(e)
    if op in _SYMBOLICS:
        with _symbolic(op):
            export()
        return
    newer = _newer_opset(e)
    if newer is None:
        raise e
    try:
        export(opset_version=newer)
    except Exception as e2:
        raise RecordError(f"graph {graph}: torch.onnx.export failed at torch's default opset "
                          f"({type(e).__name__}: {_short(e, 300)}) and at opset {newer}: "
                          f"{type(e2).__name__}: {_short(e2)}") from e2


def _zero(g, self):
    from torch.onnx import symbolic_opset9

    return symbolic_opset9.zeros_like(g, self)


#: operators torch 1.13 exports at no opset, with the ONNX they are: aten::zero (Tensor.zero_ on a
#: slice, as torchvision's swin_v2 attention does to its key bias) is zeros_like.
_SYMBOLICS = {"aten::zero": _zero}


@contextlib.contextmanager
def _symbolic(op):
    from torch.onnx import _constants
    from torch.onnx._internal import registration

    had = registration.registry.get_function_group(op) is not None
    torch.onnx.register_custom_op_symbolic(op, _SYMBOLICS[op], _constants.ONNX_BASE_OPSET)
    try:
        yield
    finally:
        torch.onnx.unregister_custom_op_symbolic(op, _constants.ONNX_BASE_OPSET)
        # torch keeps the operator's function group, empty, once its last symbolic is
        # unregistered, and the next export of the operator then fails with ValueError("min()
        # arg is an empty sequence") instead of the UnsupportedOperatorError that names it and
        # brings that export here: a second model of the process (swin_v2_t after swin_t) could
        # not be recorded. The registry is left as it was found.
        if not had:
            registration.registry._registry.pop(op, None)


def _unsupported_op(e):
    """The operator of an UnsupportedOperatorError ("Exporting the operator 'aten::zero' to ONNX opset ..."), or None."""
    import re

    m = re.search(r"operator '([\w:.]+)' to ONNX opset", str(e))
    return m.group(1) if m else None


def _newer_opset(e):
    """The newest opset torch can export, when e is an operator the default opset cannot; else None."""
    try:
        from torch.onnx import _constants
        newest = _constants.ONNX_MAX_OPSET
        default = _constants.ONNX_DEFAULT_OPSET
    except (ImportError, AttributeError):
        return None
    unsupported = isinstance(e, getattr(torch.onnx.errors, "UnsupportedOperatorError", ())) or \
        ("opset version" in str(e) and "not supported" in str(e))
    return newest if unsupported and newest > default else None


def _restore(modes):
    for m, training in modes.items():
        m.training = training


def _short(e, n=600):
    s = str(e).strip()
    return s if len(s) <= n else s[:n] + "…"


def _has_external(model):
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


def _gather_external(model, path):
    """Move every external tensor of the model at `path` into one `<name>.data` file beside it.

    torch < 2 writes one file per initializer, named after it; AITune's
    exporter (torch 2.x) writes one `<model>.data`. The model proto without
    its data is small; the data is streamed file by file, never held whole.
    """
    data_name = path.name + ".data"
    data_path = path.parent / data_name
    old = set()
    with open(data_path, "wb") as out:
        for t in model.graph.initializer:
            if t.data_location != onnx.TensorProto.EXTERNAL:
                continue
            info = {e.key: e.value for e in t.external_data}
            src = path.parent / info["location"]
            offset = int(info.get("offset", 0))
            length = int(info["length"]) if "length" in info else src.stat().st_size - offset
            pad = (-out.tell()) % 4096
            out.write(b"\0" * pad)
            start = out.tell()
            with open(src, "rb") as f:
                f.seek(offset)
                left = length
                while left:
                    chunk = f.read(min(left, 64 << 20))
                    if not chunk:
                        raise RecordError(f"external data of {t.name}: {src} is shorter than its length {length}")
                    out.write(chunk)
                    left -= len(chunk)
            old.add(src)
            del t.external_data[:]
            for k, v in (("location", data_name), ("offset", str(start)), ("length", str(length))):
                e = t.external_data.add()
                e.key, e.value = k, v
    path.write_bytes(model.SerializeToString())
    for src in old:
        if src != data_path:
            src.unlink()
    return model


def _keep_unused_inputs(model, path, spec, input_names):
    """Put back the inputs the tracer dropped because forward never reads them.

    AITune's backends bind only the inputs an engine has, so such a graph is
    AITune's too; the bundle declares every input of the recording, and ONNX
    Runtime accepts (and ignores) an input no node reads.
    """
    from tunefleet.tensors import DTYPES

    by_name = {v.name: v for v in model.graph.input}
    graph_inputs = []
    for (loc, tspec), name in zip(spec.input_spec.tensor_data, input_names):
        if name in by_name:
            graph_inputs.append(by_name[name])
            continue
        dims = [d if isinstance(d, int) else str(d) for d in tspec.shape]
        graph_inputs.append(onnx.helper.make_tensor_value_info(name, DTYPES[tspec.dtype][1], dims))
    rest = [v for v in model.graph.input if v.name not in set(input_names)]
    del model.graph.input[:]
    model.graph.input.extend(graph_inputs + rest)
    path.write_bytes(model.SerializeToString())
