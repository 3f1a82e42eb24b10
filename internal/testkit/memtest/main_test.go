package memtest

import (
	"testing"

	"github.com/tunefleet/tunefleet/internal/testkit/stack"
)

// TestMain serves the roles of stack.Main: the producer and worker
// processes whose memory the tests measure, and their ONNX Runtime children.
func TestMain(m *testing.M) { stack.Main(m, stack.MainOptions{}) }
