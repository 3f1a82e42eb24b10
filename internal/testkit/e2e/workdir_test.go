package e2e_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	tstack "github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/runstate"
)

// watchDir lists every file under dir, every few milliseconds, until stop
// is closed; it keeps every path it ever saw (a task's scratch lives only
// while the task runs).
type watchDir struct {
	mu   sync.Mutex
	seen map[string]bool
}

func watch(dir string, stop <-chan struct{}) *watchDir {
	w := &watchDir{seen: map[string]bool{}}
	go func() {
		for {
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && p != dir {
					rel, _ := filepath.Rel(dir, p)
					w.mu.Lock()
					w.seen[rel] = true
					w.mu.Unlock()
				}
				return nil
			})
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *watchDir) paths() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for p := range w.seen {
		out = append(out, p)
	}
	return out
}

// A worker's scratch (the graph's downloaded files, the engines built, the
// build logs) goes under --work-dir ($TUNEFLEET_WORK_DIR), the pod's big
// volume, and nothing under TMPDIR, the pod's small /tmp (issue 34: it
// went to os.TempDir(), and a big bundle filled /tmp and got the pod
// evicted). TMPDIR is an empty directory of the test's that must stay
// empty through the whole run, finalize included.
func TestWorkerScratchInWorkDir(t *testing.T) {
	tests := []struct {
		name string
		// how the work directory is given
		flag bool
	}{
		{"flag", true},
		{"environment", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := tstack.New(t, tstack.Options{})
			work, tmp := t.TempDir(), t.TempDir()
			stop := make(chan struct{})
			inWork, inTmp := watch(work, stop), watch(tmp, stop)
			defer close(stop)

			const model = "e2e.WorkDir"
			dir := tstack.ModelBundle(t, model, onnxtest.MLP(64, 32, 8), onnxtest.ConvNet())
			o := tstack.WorkerOptions{Env: []string{"TMPDIR=" + tmp}}
			if tt.flag {
				o.Args = []string{"--work-dir", work}
			} else {
				o.Env = append(o.Env, cli.WorkDirEnv+"="+work)
			}
			s.StartWorker(o)
			run, r := s.Submit(dir, "--candidates", "ort:cpu:basic,ort:cpu:extended", "--bench-time", "300ms")
			if r.Code != 0 {
				t.Fatalf("submit: %v", r)
			}
			if st := s.WaitFinal(run, 3*time.Minute); st.Status != runstate.RunDone {
				t.Fatalf("run ended %s, want done: %+v", st.Status, st)
			}
			time.Sleep(50 * time.Millisecond) // one more look at both

			// The task's scratch was under the work directory: its own
			// directory, the graph's files and the candidates' output.
			var scratch, graphs, files int
			for _, p := range inWork.paths() {
				first, rest, _ := strings.Cut(p, string(filepath.Separator))
				if strings.HasPrefix(first, "tunefleet-task-") {
					if rest == "" {
						scratch++
					} else {
						files++
					}
					if strings.HasSuffix(rest, ".onnx") {
						graphs++
					}
				}
			}
			if scratch < 2 || graphs < 2 || files < 4 {
				t.Errorf("--work-dir %s held %d task scratch directories, %d ONNX graphs, %d files; want one per graph (2), its graph and the candidates' output: %v",
					work, scratch, graphs, files, inWork.paths())
			}
			// ... and nothing was ever written to TMPDIR.
			if seen := inTmp.paths(); len(seen) > 0 {
				t.Errorf("TMPDIR %s got %v while the worker ran with --work-dir %s, want it left empty", tmp, seen, work)
			}
			// A finished task leaves nothing behind.
			if left, _ := os.ReadDir(work); len(left) > 0 {
				t.Errorf("work dir still holds %d entries after the run: %v", len(left), left)
			}
		})
	}
}

// A --work-dir that cannot hold scratch is refused before the worker
// starts, with exit 2 and the flag named.
func TestWorkerWorkDirRefused(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, dir, want string }{
		{"missing", filepath.Join(t.TempDir(), "nope"), "no such file"},
		{"a file", file, "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb strings.Builder
			code := cli.Execute(cli.NewWorker(), []string{"run", "--redis", "redis://127.0.0.1:1", "--store", "file://" + t.TempDir(), "--queues", "cpu", "--work-dir", tt.dir}, &out, &errb)
			if code != cli.ExitUsage || !strings.Contains(errb.String(), "--work-dir "+tt.dir) || !strings.Contains(errb.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want %d naming --work-dir %s and %q", code, errb.String(), cli.ExitUsage, tt.dir, tt.want)
			}
		})
	}
}
