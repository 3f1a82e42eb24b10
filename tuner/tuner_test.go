package tuner_test

import (
	"os"
	"testing"

	"github.com/tunefleet/tunefleet/ort"
)

func TestMain(m *testing.M) {
	ort.MaybeServeChild()
	os.Exit(m.Run())
}

// needORT skips when the library is absent locally; in CI a missing library
// is a failure.
func needORT(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping a test that runs ONNX Runtime")
	}
	if _, err := ort.FindLibrary(""); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but %v", err)
		}
		t.Skip(err)
	}
}
