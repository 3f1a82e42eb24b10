"""Helpers for driving real AITune objects on a CPU-only machine.

Nothing here replaces an AITune class. What a CPU cannot run is the engine
itself (a TensorRT plan or a CUDA ONNX Runtime session); `run_engine_on_cpu`
puts a function in its place on one loaded backend instance and keeps
AITune's own code on both sides of it: routing (`TunedModule`), input
mapping (`_prepare_inputs`), TensorRT profile selection
(`_set_optimization_profiles`) and output rebuilding (`_prepare_outputs`,
`_prepare_outputs_for_return`).
"""

import dataclasses
import enum
import math
import pathlib
import pickle
import types
from collections.abc import Mapping


def canon(v, artifact=None):
    """A comparable form of an AITune state: nested pickles unpickled, NaN
    made equal to itself, artifacts by their checkpoint-relative path (or by
    artifact(a) when given)."""
    import torch
    from aitune.torch.checkpoint.artifact import ArtifactPath

    if isinstance(v, bytes) and v[:1] == b"\x80":
        return ("pickle", canon(pickle.loads(v), artifact))
    if isinstance(v, ArtifactPath):
        return ("ArtifactPath", artifact(v) if artifact else v.relative_path.as_posix())
    if isinstance(v, float) and math.isnan(v):
        return ("float", "nan")
    if isinstance(v, (torch.device, torch.dtype)):
        return (type(v).__name__, str(v))
    if isinstance(v, enum.Enum) and isinstance(v, str):
        # ONNXExecutionProvider is a str enum: AITune saves the member, Go
        # writes its string, from_dict accepts both and they compare equal.
        return v.value
    if isinstance(v, enum.Enum):
        return (type(v).__name__, v.value)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return (type(v).__name__, {f.name: canon(getattr(v, f.name), artifact) for f in dataclasses.fields(v)})
    if isinstance(v, Mapping):
        return ("map", [(canon(k, artifact), canon(x, artifact)) for k, x in v.items()])
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [canon(x, artifact) for x in v])
    if isinstance(v, pathlib.PurePath):
        return ("Path", v.as_posix())
    if type(v).__module__.startswith("aitune."):
        # Locator, SampleMetadata: their state is their private attributes
        # (a cached display_path is not state).
        return (type(v).__name__, {k: canon(x, artifact) for k, x in sorted(vars(v).items()) if k.startswith("_")})
    return v


class EngineCalls:
    """What the engine stand-ins saw, in call order."""

    def __init__(self):
        self.calls = []  # (graph name, {input name: tensor}, selected TensorRT profile or None)


def run_engine_on_cpu(backend, graph_name, engine, seen):
    """Replace the GPU step of one loaded backend by `engine(inputs) -> {output name: tensor}`.

    `backend.infer` is wrapped on this instance only; the real AITune methods
    around the engine run unchanged.
    """
    from aitune.torch.backend.onnx_runtime_backend import ONNXRuntimeBackend
    from aitune.torch.backend.tensorrt.tensorrt_backend import TensorRTBackend

    if isinstance(backend, TensorRTBackend):
        profiles_path = backend._trt_optimization_profiles_artifact.path
        backend._trt_optimization_profiles = backend._load_trt_optimization_profiles(profiles_path)
        names = sorted({n for p in backend._trt_optimization_profiles for n in p.keys()})
        backend._engine_info = types.SimpleNamespace(input_names=names)
        selected = []

        class Context:  # TensorRT's IExecutionContext: the profile it is told to use
            def set_optimization_profile_async(self, index, _stream):
                selected.append(index)
                return True

        backend._context = Context()
        backend._cuda_stream = types.SimpleNamespace(cuda_stream=0)

        def infer(*args, **kwargs):
            selected.clear()
            inputs = backend._prepare_inputs(args, kwargs)
            backend._set_optimization_profiles(inputs)
            backend._output_allocator = types.SimpleNamespace(outputs=engine(inputs))
            seen.calls.append((graph_name, inputs, selected[0] if selected else None))
            return backend._prepare_outputs_for_return()

    elif isinstance(backend, ONNXRuntimeBackend):
        if backend._session is None:
            # Not deployed (a golden's model is placeholder bytes no runtime
            # opens): the session would expose the graph's own input names.
            from aitune.torch.utils.tensor import format_tensor_name

            names = [format_tensor_name(loc.path, "input") for loc, _ in backend._graph_spec.input_spec.tensor_data]
            backend._session = types.SimpleNamespace(get_inputs=lambda: [types.SimpleNamespace(name=n) for n in names])

        def infer(*args, **kwargs):
            inputs = backend._prepare_inputs(args, kwargs)
            seen.calls.append((graph_name, inputs, None))
            return backend._prepare_outputs(engine(inputs))

    else:
        raise TypeError(f"no CPU engine stand-in for {type(backend).__name__}")
    backend.infer = infer
