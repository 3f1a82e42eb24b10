package bundle

import (
	"fmt"
	"strings"
)

// MinOpset is the oldest default-domain (ai.onnx) opset whose operators
// ONNX Runtime 1.24 still implements throughout: it dropped kernels of
// several ops at versions 1..6 (AveragePool-1, BatchNormalization-6,
// Add-6, PRelu-6, …), so a model stamped with opset 6 or older may load
// and fail on its first such node.
const MinOpset = 7

// DefaultOpset is the model's default-domain opset, 0 when it names none.
func (io GraphIO) DefaultOpset() int64 {
	if v, ok := io.Opsets[""]; ok {
		return v
	}
	return io.Opsets["ai.onnx"]
}

// ExplainOldOpset turns ONNX Runtime's "Could not find an implementation
// for AveragePool(1) node" into what it means and what to do, when the
// model's opset is older than MinOpset; other errors come back as they are.
func (io GraphIO) ExplainOldOpset(err error) error {
	v := io.DefaultOpset()
	if err == nil || v == 0 || v >= MinOpset || !strings.Contains(err.Error(), "Could not find an implementation for") {
		return err
	}
	return fmt.Errorf("the model needs ONNX opset %d, whose version of an operator this ONNX Runtime no longer has (it runs opset %d and later): "+
		"upgrade the model's opset with ONNX's version converter, e.g. python3 -c "+
		"\"import onnx, onnx.version_converter as vc; onnx.save(vc.convert_version(onnx.load('IN.onnx'), 13), 'OUT.onnx')\" "+
		"(Debian: apt-get install python3-onnx), and use OUT.onnx: %w", v, MinOpset, err)
}
