"""CPU test stand-in for modelopt.onnx.quantization.qdq_utils (see _gpu_standin.py)."""
from _gpu_standin import absent

__getattr__ = absent(__name__)
