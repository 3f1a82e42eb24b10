"""Shared helper of the CPU stand-ins for AITune's GPU-only third-party imports.

AITune imports TensorRT, ONNX Runtime (GPU build), ModelOpt, TorchAO, NVTX and
NVML at module level. None of them is installable on a CPU-only Debian
machine, and none is needed to unpickle, relocate, route or re-serialize a
checkpoint. Each stand-in module resolves any attribute to a placeholder class
that fails loudly when used, so a test that strays past the CPU boundary
fails with a message saying so instead of passing on a fake.
"""


class StandInUnavailable(RuntimeError):
    """Raised when a test reaches code that needs the real GPU package."""


class _Placeholder(type):
    """Metaclass of the placeholders: class attributes (enum members such as
    `trt.Logger.INFO`, used as defaults at import time) are placeholders too."""

    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return placeholder(cls.__module__, f"{cls.__qualname__}.{name}")


def placeholder(module_name, qualname):
    """A class that stands for a GPU package's name and refuses to be used."""

    def refuse(*_args, **_kwargs):
        raise StandInUnavailable(
            f"{module_name}.{qualname} is a CPU test stand-in: this path needs the real "
            f"{module_name.split('.')[0]} package and a GPU"
        )

    # A class, so that annotations such as `X | None` and subclassing work.
    name = qualname.rsplit(".", 1)[-1]
    return _Placeholder(name, (), {"__init__": refuse, "__call__": refuse, "__module__": module_name, "__qualname__": qualname})


def absent(module_name):
    """A module-level __getattr__ (PEP 562) for a stand-in module."""

    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        return placeholder(module_name, name)

    return __getattr__
