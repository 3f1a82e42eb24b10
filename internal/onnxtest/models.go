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
