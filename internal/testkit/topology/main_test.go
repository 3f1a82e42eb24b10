package topology_test

import (
	"testing"

	"github.com/tunefleet/tunefleet/internal/testkit/stack"
)

// TestMain serves stack's roles: every worker, producer command, trtexec
// stand-in and ONNX Runtime session child the tests start is this binary.
func TestMain(m *testing.M) { stack.Main(m, stack.MainOptions{}) }
