"""CPU test stand-in for tensorrt (see _gpu_standin.py)."""
from _gpu_standin import absent

__getattr__ = absent(__name__)
