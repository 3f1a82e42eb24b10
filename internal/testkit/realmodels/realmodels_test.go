package realmodels_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/realmodels"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/tuner"
)

func TestMain(m *testing.M) { orttest.Main(m) }

// candidates are tuned for every model: ONNX Runtime with no graph
// optimization, the portable one, and all of them.
const candidates = "ort:cpu:disabled,ort:cpu:basic,ort:cpu:all"

// cases say how each model of models.tsv is recorded, and which batch sizes
// its tuning must sweep (nil: none, the recorded sample measured as it is).
var cases = []struct {
	name  string
	kind  string
	flags []string // producer bundle from-onnx flags
	sweep []int
}{
	{"silero_vad_v5.onnx", "voice activity (state batch axis unnamed at 1, sample-rate scalar)",
		[]string{"--shape", "input:1x512..4x512", "--shape", "state:2x1x128..2x4x128", "--batch-axis", "state:1", "--value", "sr=16000"}, []int{1, 2, 4}},
	{"silero_vad_legacy.onnx", "voice activity (h, c batch axis named at 1, sample-rate scalar)",
		[]string{"--shape", "input:1x512..4x512", "--shape", "h:2x1x64..2x4x64", "--shape", "c:2x1x64..2x4x64", "--value", "sr=16000"}, []int{1, 2, 4}},
	{"ppocrv4_det.onnx", "OCR text detection (image segmentation)",
		[]string{"--shape", "x:1x3x96x96..4x3x96x96"}, []int{1, 2, 4}},
	{"ppocrv4_rec.onnx", "OCR text recognition (CTC over 6,625 characters)",
		[]string{"--shape", "x:1x3x48x160..4x3x48x160"}, []int{1, 2, 4}},
	{"ppocr_mobile_v2_cls.onnx", "OCR text orientation (image classification)",
		[]string{"--shape", "x:1x3x48x192..4x3x48x192"}, []int{1, 2, 4}},
	{"openwakeword_hello_deepa.onnx", "wake word (classifier over audio embeddings, static [1,25,96])",
		nil, nil},
}

func TestEveryModelGetsACorrectWinner(t *testing.T) {
	orttest.Need(t)
	list, err := realmodels.ReadList("models.tsv")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(cases) {
		t.Fatalf("models.tsv has %d models, the test %d: keep them in step", len(list), len(cases))
	}
	dir := realmodels.Dir()
	var table []string
	for i, m := range list {
		tc := cases[i]
		if tc.name != m.Name {
			t.Fatalf("models.tsv row %d is %s, the test's %s", i, m.Name, tc.name)
		}
		t.Run(m.Name, func(t *testing.T) {
			path, err := m.Path(dir)
			if os.IsNotExist(err) {
				if testsvc.InCI() {
					t.Fatalf("CI is set but %s is not fetched (make models): %v", m.Name, err)
				}
				t.Skipf("%s is not fetched (make models): %v", m.Name, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			r := bundleAndTune(t, path, tc.flags)
			checkWinner(t, r, tc.sweep)
			table = append(table, row(m, tc.kind, r))
		})
	}
	if len(table) > 0 {
		t.Logf("real models, %s, max-throughput:\n| model | from | kind | winner | samples/s by batch |\n|---|---|---|---|---|\n%s",
			candidates, strings.Join(table, "\n"))
	}
}

// bundleAndTune records the model with `producer bundle from-onnx` and
// tunes it with `worker tune`, both as a user runs them.
func bundleAndTune(t *testing.T, model string, flags []string) tuner.Result {
	t.Helper()
	tmp := t.TempDir()
	b := filepath.Join(tmp, "bundle")
	var stdout, stderr bytes.Buffer
	args := append([]string{"bundle", "from-onnx", model, "-o", b}, flags...)
	if code := cli.Execute(cli.NewProducer(), args, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("producer %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	args = []string{"tune", b, "--candidates", candidates, "--strategy", "max-throughput", "--bench-time", "200ms",
		"-q", "-o", "json", "--out", filepath.Join(tmp, "tuned")}
	if code := cli.Execute(cli.NewWorker(), args, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("worker %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	var rs []tuner.Result
	if err := json.Unmarshal(stdout.Bytes(), &rs); err != nil || len(rs) != 1 {
		t.Fatalf("worker tune -o json: %v (%d results)\n%s", err, len(rs), stdout.String())
	}
	return rs[0]
}

// checkWinner asks of a result what "tuned right" means: every candidate
// correct on every recorded sample, each measured at exactly the batch
// sizes the inputs allow (or once, with the reason, when they allow no
// sweep), and the winner the one with the highest throughput.
func checkWinner(t *testing.T, r tuner.Result, sweep []int) {
	t.Helper()
	if !r.OK() {
		t.Fatalf("no winner: %+v", r.Failure)
	}
	if !slices.Equal(r.BatchSizes, sweep) {
		t.Errorf("swept batch sizes %v, want %v (no_sweep: %q)", r.BatchSizes, sweep, r.NoSweep)
	}
	if (sweep == nil) != (r.NoSweep != "") {
		t.Errorf("no_sweep %q with batch sizes %v", r.NoSweep, r.BatchSizes)
	}
	want := sweep
	if want == nil {
		want = []int{1}
	}
	best, bestAt := 0.0, -1
	for i, c := range r.Results {
		if !c.Passed() {
			t.Errorf("%s: %s (%+v)", c.Candidate, c.Status, c.Failure)
			continue
		}
		if c.CheckedAt < 2 {
			t.Errorf("%s: checked on %d samples, want 2", c.Candidate, c.CheckedAt)
		}
		var got []int
		for _, st := range c.Benchmarks {
			got = append(got, st.BatchSize)
			if !(st.Throughput > 0) {
				t.Errorf("%s: throughput %v at batch %d", c.Candidate, st.Throughput, st.BatchSize)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: measured at batches %v, want %v", c.Candidate, got, want)
		}
		if st, ok := c.BestThroughput(0); ok && st.Throughput > best {
			best, bestAt = st.Throughput, i
		}
	}
	if r.Winner.Index != bestAt {
		t.Errorf("winner %s (#%d), but #%d has the highest throughput %.1f", r.Winner.Candidate, r.Winner.Index, bestAt, best)
	}
}

// row is the model's line of docs/tuning.md's "Real models" table.
func row(m realmodels.Model, kind string, r tuner.Result) string {
	var cells []string
	for _, c := range r.Results {
		var by []string
		for _, st := range c.Benchmarks {
			by = append(by, fmt.Sprintf("%d: %.0f", st.BatchSize, st.Throughput))
		}
		cells = append(cells, fmt.Sprintf("%s %s", strings.TrimPrefix(c.Candidate, "ort:cpu:"), strings.Join(by, ", ")))
	}
	note := ""
	if r.NoSweep != "" {
		note = " (no sweep: static shapes)"
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s%s |", m.Name, m.Source(), kind, r.Winner.Candidate, strings.Join(cells, "; "), note)
}
