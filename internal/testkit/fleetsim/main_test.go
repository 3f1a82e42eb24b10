package fleetsim

import (
	"testing"

	"github.com/tunefleet/tunefleet/internal/testkit/stack"
)

// TestMain serves the roles the simulator starts this binary in (`worker
// run`, `producer nightly`, `producer serve`, ONNX Runtime's session
// child for the reference outputs), or runs the tests.
func TestMain(m *testing.M) { stack.Main(m, stack.MainOptions{}) }
