"""Tensors to ONNX TensorProto files (the ONNX test-data layout the bundle uses)."""

import onnx
import torch

#: torch dtype -> (bundle dtype name, ONNX TensorProto data type)
DTYPES = {
    torch.float32: ("float32", onnx.TensorProto.FLOAT),
    torch.float16: ("float16", onnx.TensorProto.FLOAT16),
    torch.bfloat16: ("bfloat16", onnx.TensorProto.BFLOAT16),
    torch.float64: ("float64", onnx.TensorProto.DOUBLE),
    torch.int8: ("int8", onnx.TensorProto.INT8),
    torch.uint8: ("uint8", onnx.TensorProto.UINT8),
    torch.int16: ("int16", onnx.TensorProto.INT16),
    torch.int32: ("int32", onnx.TensorProto.INT32),
    torch.int64: ("int64", onnx.TensorProto.INT64),
    torch.bool: ("bool", onnx.TensorProto.BOOL),
}


def dtype_name(dtype):
    """The bundle's name of a torch dtype, or None when the bundle has none."""
    entry = DTYPES.get(dtype)
    return entry[0] if entry else None


def to_tensorproto(t, name=""):
    """A TensorProto with little-endian raw_data (bfloat16 included, which numpy lacks)."""
    t = t.detach().to("cpu").contiguous()
    _, onnx_type = DTYPES[t.dtype]
    raw = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
    proto = onnx.TensorProto()
    proto.name = name
    proto.data_type = onnx_type
    proto.dims.extend(t.shape)
    proto.raw_data = raw.numpy().tobytes()
    return proto


def write_tensor(path, t, name=""):
    path.write_bytes(to_tensorproto(t, name).SerializeToString())


def read_tensor(path):
    """The inverse of write_tensor (tests and tools read samples back with it)."""
    from onnx import numpy_helper

    proto = onnx.TensorProto()
    proto.ParseFromString(path.read_bytes())
    return torch.from_numpy(numpy_helper.to_array(proto).copy())
