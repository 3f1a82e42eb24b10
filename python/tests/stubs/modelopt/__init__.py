"""CPU test stand-in for NVIDIA ModelOpt (see _gpu_standin.py).

AITune compares `modelopt.__version__` at import time to pick code paths;
the value only has to be a version string, no quantization ever runs here.
"""
from _gpu_standin import absent

__version__ = "0.0.0+cpu-standin"

__getattr__ = absent(__name__)
