package bundle_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
)

// An external-data file shorter than the model's tensors say is refused
// at validation, naming the file and both sizes; one of the right size, or
// longer, is accepted. Before, the bundle validated and ONNX Runtime failed
// on it in a worker.
func TestTruncatedExternalDataIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delta int64 // bytes added to the file (negative: cut)
		want  string
	}{
		{"whole", 0, ""},
		{"longer", 100, ""},
		{"one byte short", -1, "holds %d bytes, but the model's tensors need %d"},
		{"empty", -1 << 40, "holds 0 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := bundletest.Write(t)
			bundletest.Externalize(t, filepath.Join(dir, onnx0), "weights/mlp.bin", true)
			p := filepath.Join(dir, "0", "weights", "mlp.bin")
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			size := max(fi.Size()+tc.delta, 0)
			if err := os.Truncate(p, size); err != nil {
				t.Fatal(err)
			}
			_, err = bundle.Open(dir)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("a %d-byte file the model needs %d of: %v", size, fi.Size(), err)
				}
				return
			}
			want := tc.want
			if strings.Contains(want, "%d") {
				want = strings.NewReplacer("%d bytes, but", itoa(size)+" bytes, but", "need %d", "need "+itoa(fi.Size())).Replace(want)
			}
			if err == nil || !bundle.IsInvalid(err) || !strings.Contains(err.Error(), `"0/weights/mlp.bin"`) || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v, want an invalid bundle naming 0/weights/mlp.bin and %q", err, want)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
