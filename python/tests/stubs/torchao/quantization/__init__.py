"""CPU test stand-in for torchao.quantization.

AITune builds a table of TorchAO configs at import time, so the config
classes here can be constructed (they only keep their arguments, like the
real config dataclasses). `quantize_`, the only thing that does work, refuses.
"""
from _gpu_standin import absent


class _Config:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class Float8DynamicActivationFloat8WeightConfig(_Config):
    pass


class Float8WeightOnlyConfig(_Config):
    pass


class Int8DynamicActivationInt8WeightConfig(_Config):
    pass


class Int8WeightOnlyConfig(_Config):
    pass


class PerTensor(_Config):
    pass


__getattr__ = absent(__name__)  # quantize_ and the rest: placeholders that refuse
