"""ONNX export of one recorded graph spec with torch.onnx.export's trace exporter.

Tensor names are AITune's (`format_tensor_name`), dynamic axes are those
AITune's own trace exporter (`ONNXExporter._create_dynamic_axes`) derives from
the graph spec, so the ONNX graph binds exactly as AITune's TensorRT and ONNX
Runtime backends bind theirs.
"""

import inspect
import warnings

import onnx
import torch

from tunefleet.errors import RecordError

_EXPORT_PARAMS = inspect.signature(torch.onnx.export).parameters


def _has_tensor(v):
    if isinstance(v, torch.Tensor):
        return True
    if isinstance(v, dict):
        return any(_has_tensor(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return any(_has_tensor(x) for x in v)
    return False


class _CallWithConstants(torch.nn.Module):
    """module called with the recorded call's arguments: the ones holding
    tensors are the traced inputs (in forward-signature order, which is the
    order of AITune's input spec), the others are constants of this graph
    (AITune keys the graph on them in strict mode).

    The trace exporter takes positional arguments only, and keyword-only or
    non-tensor arguments do not survive it portably across torch versions
    (torch < 2.5 has no `kwargs=`); this wrapper sidesteps both.
    """

    def __init__(self, module, arguments, traced_names, output_locators):
        super().__init__()
        self.output_locators = output_locators
        self.module = module
        self.arguments = arguments
        self.traced_names = traced_names
        self.params = inspect.signature(module.forward).parameters

    @classmethod
    def of(cls, module, spec, sample):
        args, kwargs = sample
        bound = inspect.signature(module.forward).bind(*args, **kwargs)
        names = [n for n, v in bound.arguments.items() if _has_tensor(v)]
        outputs = [loc for loc, _ in spec.output_spec.tensor_data]
        return cls(module, dict(bound.arguments), names, outputs), tuple(bound.arguments[n] for n in names)

    def forward(self, *traced):
        arguments = dict(self.arguments)
        arguments.update(zip(self.traced_names, traced))
        pos, kw = [], {}
        for name, value in arguments.items():
            kind = self.params[name].kind
            if kind is inspect.Parameter.POSITIONAL_ONLY:
                pos.append(value)
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                pos.extend(value)
            elif kind is inspect.Parameter.VAR_KEYWORD:
                kw.update(value)
            else:
                kw[name] = value
        out = self.module(*pos, **kw)
        # Only the tensor leaves, in AITune's output-spec order: the ONNX
        # outputs then line up with output_names whatever the containers.
        return tuple(loc.get_value(out) for loc in self.output_locators)


def export_graph(module, spec, sample, path):
    """Export `module` called as `sample` (normalized args, kwargs) to `path`."""
    from aitune.torch.libs.onnx.onnx_exporter import ONNXExporter
    from aitune.torch.utils.tensor import format_tensor_name

    input_names = [format_tensor_name(loc.path, "input") for loc, _ in spec.input_spec.tensor_data]
    output_names = [format_tensor_name(loc.path, "output") for loc, _ in spec.output_spec.tensor_data]
    dynamic_axes = dict(ONNXExporter(output_path=path, use_dynamo=False)._create_dynamic_axes(spec))
    call, traced = _CallWithConstants.of(module, spec, sample)
    extra = {"dynamo": False} if "dynamo" in _EXPORT_PARAMS else {}
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # unnamed dynamic axes, tracer notes: not the user's business
            torch.onnx.export(call, traced, str(path), input_names=input_names, output_names=output_names,
                              dynamic_axes=dynamic_axes, **extra)
    except Exception as e:
        raise RecordError(f"graph {spec.name}: torch.onnx.export failed: {type(e).__name__}: {e}") from e
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    init = {i.name for i in model.graph.initializer}
    got_in = [v.name for v in model.graph.input if v.name not in init]
    got_out = [v.name for v in model.graph.output]
    if got_in != input_names:
        missing = [n for n in input_names if n not in got_in]
        raise RecordError(
            f"graph {spec.name}: the exported ONNX graph has inputs {got_in}, AITune recorded {input_names}"
            + (f"; forward does not use {missing}: a tensor argument forward ignores cannot be bound by name" if missing else "")
        )
    if got_out != output_names:
        raise RecordError(f"graph {spec.name}: the exported ONNX graph has outputs {got_out}, AITune recorded {output_names} "
                          f"(an output that is an input returned unchanged, or the same tensor returned twice, cannot be exported)")
