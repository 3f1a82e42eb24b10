package onnxtest

import "github.com/tunefleet/tunefleet/internal/onnxpb"

const f32 = onnxpb.TensorProto_FLOAT

// MLP is input[N,in] → MatMul → Add → Relu → MatMul → Add → output[N,out]
// with a symbolic batch dim "N".
func MLP(in, hidden, out int) *Builder {
	b := New("mlp", 13)
	b.Input("input", f32, "N", in).Output("output", f32, "N", out)
	b.Random("w1", 0.2, int64(in), int64(hidden)).Random("b1", 0.1, int64(hidden))
	b.Random("w2", 0.2, int64(hidden), int64(out)).Random("b2", 0.1, int64(out))
	b.Node("MatMul", []string{"input", "w1"}, []string{"h0"})
	b.Node("Add", []string{"h0", "b1"}, []string{"h1"})
	b.Node("Relu", []string{"h1"}, []string{"h2"})
	b.Node("MatMul", []string{"h2", "w2"}, []string{"h3"})
	b.Node("Add", []string{"h3", "b2"}, []string{"output"})
	return b
}

// ConvNet is image[N,3,16,16] → Conv(8, 3×3, stride 2, pad 1) → Relu →
// Flatten → Gemm → logits[N,10].
func ConvNet() *Builder {
	b := New("convnet", 13)
	b.Input("image", f32, "N", 3, 16, 16).Output("logits", f32, "N", 10)
	b.Random("conv_w", 0.3, 8, 3, 3, 3).Random("conv_b", 0.1, 8)
	b.Random("fc_w", 0.05, 10, 512).Random("fc_b", 0.1, 10)
	b.Node("Conv", []string{"image", "conv_w", "conv_b"}, []string{"c0"},
		IntsAttr("kernel_shape", 3, 3), IntsAttr("strides", 2, 2), IntsAttr("pads", 1, 1, 1, 1))
	b.Node("Relu", []string{"c0"}, []string{"c1"})
	b.Node("Flatten", []string{"c1"}, []string{"c2"}, IntAttr("axis", 1))
	b.Node("Gemm", []string{"c2", "fc_w", "fc_b"}, []string{"logits"}, IntAttr("transB", 1))
	return b
}

// TwoInputs is a[N,8] and mask[N,8] → Mul → Tanh → y[N,8], and a second
// output s[N] = ReduceSum(y, axis 1): several inputs and outputs.
func TwoInputs() *Builder {
	b := New("two_inputs", 13)
	b.Input("a", f32, "N", 8).Input("mask", f32, "N", 8)
	b.Output("y", f32, "N", 8).Output("s", f32, "N")
	b.Int64s("axes", []int64{1}, []int64{1})
	b.Node("Mul", []string{"a", "mask"}, []string{"m"})
	b.Node("Tanh", []string{"m"}, []string{"y"})
	b.Node("ReduceSum", []string{"y", "axes"}, []string{"s"}, IntAttr("keepdims", 0))
	return b
}

// Streaming is a recurrent cell's shape as silero VAD has it: x[N,4], a
// scalar rate sr (int64, rank 0) and a state [2,<stateBatch>,3] whose batch
// axis is axis 1 → y[N,4] = x·rate, state_out = Tanh(state). stateBatch is
// the state's dim name: "N" (a name that says batch) or "" (unnamed, so
// only --batch-axis state:1 tells).
func Streaming(stateBatch string) *Builder {
	b := New("streaming", 13)
	b.Input("x", f32, "N", 4).Input("sr", onnxpb.TensorProto_INT64).Input("state", f32, 2, stateBatch, 3)
	b.Output("y", f32, "N", 4).Output("state_out", f32, 2, stateBatch, 3)
	b.Node("Cast", []string{"sr"}, []string{"rate"}, IntAttr("to", int64(f32)))
	b.Node("Mul", []string{"x", "rate"}, []string{"y"})
	b.Node("Tanh", []string{"state"}, []string{"state_out"})
	return b
}

// Half is x[N,S] (float32) → Cast to float16 → h[N,S], and a static
// float16 output s[2] = Cast(bias): float16 outputs with a batch axis,
// another dynamic axis, and none.
func Half() *Builder {
	b := New("half", 13)
	b.Input("x", f32, "N", "S").Output("h", onnxpb.TensorProto_FLOAT16, "N", "S").Output("s", onnxpb.TensorProto_FLOAT16, 2)
	b.Floats("bias", []int64{2}, []float32{0.5, -1.25})
	b.Node("Cast", []string{"x"}, []string{"h"}, IntAttr("to", int64(onnxpb.TensorProto_FLOAT16)))
	b.Node("Cast", []string{"bias"}, []string{"s"}, IntAttr("to", int64(onnxpb.TensorProto_FLOAT16)))
	return b
}

// ThreeDynamic has three inputs that all need --shape: an image [N,3,H,W],
// a sequence [batch,seq] and an input with no declared shape; y = ReduceSum
// of the image over all axes.
func ThreeDynamic() *Builder {
	b := New("three_dynamic", 13)
	b.Input("image", f32, "N", 3, "H", "W").Input("tokens", f32, "batch", "seq")
	b.g.Input = append(b.g.Input, valueInfo("extra", f32, nil))
	b.g.Input[2].Type.GetTensorType().Shape = nil // no declared shape at all
	b.Output("y", f32)
	b.Node("ReduceSum", []string{"image"}, []string{"y"}, IntAttr("keepdims", 0))
	return b
}

// OldOpset is y = AveragePool(x[N,1,4,4], 2×2) stamped with opset 6:
// AveragePool-1, which ONNX Runtime 1.24 no longer implements.
func OldOpset() *Builder {
	b := New("old_opset", 6)
	b.Input("x", f32, "N", 1, 4, 4).Output("y", f32, "N", 1, 2, 2)
	b.Node("AveragePool", []string{"x"}, []string{"y"}, IntsAttr("kernel_shape", 2, 2), IntsAttr("strides", 2, 2))
	return b
}

// Slow is x[n,1] → M = x·xᵀ [n,n] → P = M·M → y[1,1] = mean(P): a model
// of a few bytes whose every call does 2n³ multiply-adds (n = 2048: about
// 17 GFLOP, most of a second on one core), for tests of how a measurement
// treats a model whose calls take seconds. It has no batch axis.
func Slow(n int) *Builder {
	b := New("slow", 13)
	b.Input("x", f32, n, 1).Output("y", f32, 1, 1)
	b.Node("Transpose", []string{"x"}, []string{"xt"}, IntsAttr("perm", 1, 0))
	b.Node("MatMul", []string{"x", "xt"}, []string{"m"})
	b.Node("MatMul", []string{"m", "m"}, []string{"p"})
	b.Node("ReduceMean", []string{"p"}, []string{"y"}, IntsAttr("axes", 0, 1), IntAttr("keepdims", 1))
	return b
}
