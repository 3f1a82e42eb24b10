"""CPU test stand-in for pynvml (NVML): there is no GPU to query."""
from _gpu_standin import absent


class NVMLError(Exception):
    """pynvml's error type; AITune catches it around NVML calls."""


__getattr__ = absent(__name__)
