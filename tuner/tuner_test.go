package tuner_test

import (
	"os"
	"testing"

	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
)

func TestMain(m *testing.M) {
	// This binary is also the trtexec stand-in of the trt tests here
	// (internal/testkit/trtreplay: it replays fixture logs; it is never TensorRT).
	if cfg := os.Getenv(trtreplay.Env); cfg != "" {
		os.Exit(trtreplay.Main(cfg, os.Args[1:]))
	}
	orttest.Main(m)
}

func needORT(t testing.TB) { orttest.Need(t) }
