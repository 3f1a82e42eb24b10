package shapes

import "fmt"

// MaxDim bounds every size a spec or an explicit dynamic shape may declare
// for one axis (2^31, the largest dim TensorRT's int32 dims and ONNX
// Runtime's shape checks accept without overflow). Larger sizes can only
// come from a corrupt or hostile bundle, and a batch max of 2^40 made every
// worker that took the task ask for a 2^48-byte buffer and die.
const MaxDim int64 = 1 << 31

// checkDim refuses a declared size above MaxDim, naming where it is.
func checkDim(where string, v int64) error {
	if v > MaxDim {
		return fmt.Errorf("%s is %d, above the limit of %d (2^31) per dim", where, v, MaxDim)
	}
	return nil
}
