"""CPU test stand-in for onnxruntime-gpu.

AITune's ONNXRuntimeBackend opens its session with the CUDA or TensorRT
execution provider only, so a real CPU build of ONNX Runtime could not stand
in either. This session does what a CPU can check honestly: it loads the
model with the real `onnx` package (external data included, so a `.data` file
missing beside the model fails here as it would in ORT), checks it, and
exposes its input and output names. It records the providers it was asked
for. Running it (`io_binding`, `run_with_iobinding`) needs CUDA and fails.
"""

import types

import onnx

from _gpu_standin import StandInUnavailable, absent

#: Every session opened in this process, in order (tests read it).
SESSIONS = []


class InferenceSession:
    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **_kwargs):
        self.path = str(path_or_bytes)
        self.providers = providers
        self.model = onnx.load(self.path, load_external_data=True)
        onnx.checker.check_model(self.model)
        SESSIONS.append(self)

    def get_inputs(self):
        init = {i.name for i in self.model.graph.initializer}
        return [types.SimpleNamespace(name=v.name) for v in self.model.graph.input if v.name not in init]

    def get_outputs(self):
        return [types.SimpleNamespace(name=v.name) for v in self.model.graph.output]

    def get_providers(self):
        return [p if isinstance(p, str) else p[0] for p in self.providers or []]

    def io_binding(self):
        raise StandInUnavailable("onnxruntime.InferenceSession.io_binding is a CPU test stand-in: it needs CUDA")

    def run_with_iobinding(self, *_args, **_kwargs):
        raise StandInUnavailable("onnxruntime.InferenceSession.run_with_iobinding is a CPU test stand-in: it needs CUDA")


__getattr__ = absent(__name__)
