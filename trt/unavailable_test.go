package trt_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
	"github.com/tunefleet/tunefleet/trt"
)

// A worker that cannot run trt: candidates at all (no trtexec, TensorRT's
// libraries not loadable, a TensorRT version tunefleet does not drive)
// fails each such candidate as unavailable on this platform, and is not
// broken: its other candidates, and other tasks, still run (issue 8, item
// 5). Before, each of these marked the whole worker broken, so it took no
// more work while /healthz said 200, and the retried task broke the next
// worker too.
func TestTensorRTUnavailableIsACandidateFailure(t *testing.T) {
	noLibs := filepath.Join(t.TempDir(), "trtexec")
	script := "#!/bin/sh\necho 'trtexec: error while loading shared libraries: libnvinfer.so.10: cannot open shared object file: No such file or directory' >&2\nexit 127\n"
	if err := os.WriteFile(noLibs, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		opts  func(t *testing.T) trt.Options
		wants []string
	}{
		{"no trtexec", func(t *testing.T) trt.Options {
			return trt.Options{Executable: filepath.Join(t.TempDir(), "trtexec")}
		}, []string{"not found"}},
		{"libraries missing", func(t *testing.T) trt.Options {
			return trt.Options{Executable: noLibs}
		}, []string{"libnvinfer"}},
		{"unsupported TensorRT", func(t *testing.T) trt.Options {
			cfg := trtreplay.Working(t, nil)
			cfg.Banner = "&&&& RUNNING TensorRT.trtexec [TensorRT v8502]"
			return trt.Options{Executable: trtreplay.Executable(t), Env: []string{trtreplay.WriteConfig(t, cfg)}}
		}, []string{"8.5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hook atomic.Int32
			opts := tt.opts(t)
			opts.OnBrokenWorker = func(error) { hook.Add(1) }
			be := trt.New(opts)
			for range 2 {
				_, err := be.Build(context.Background(), backend.BuildRequest{Candidate: mustCandidate(t, "trt:fp16"), WorkDir: t.TempDir()})
				if backend.ClassOf(err, "") != backend.FailUnavailable {
					t.Fatalf("Build error = %v (class %s), want class %s", err, backend.ClassOf(err, ""), backend.FailUnavailable)
				}
				if trt.IsBrokenWorker(err) {
					t.Errorf("Build error %v says the worker is broken", err)
				}
				for _, w := range tt.wants {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Build error %q does not say %q", err, w)
					}
				}
			}
			if be.Broken() != nil || hook.Load() != 0 {
				t.Errorf("the worker was marked broken: Broken() = %v, hook called %d times", be.Broken(), hook.Load())
			}
			if backend.FailUnavailable.Retryable() {
				t.Error("unavailable is retryable: the retry would land on a worker of the same platform")
			}
		})
	}
}
