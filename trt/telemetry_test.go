package trt_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
	"github.com/tunefleet/tunefleet/trt"
)

// scriptedTelemetry returns the given verdicts in turn, one per measured
// benchmark, and records the environment each watch was started with.
type scriptedTelemetry struct {
	verdicts []string
	calls    int
	envs     [][]string
}

func (s *scriptedTelemetry) watch(_ context.Context, env []string) (func() (string, []string), error) {
	s.envs = append(s.envs, env)
	v := s.verdicts[min(s.calls, len(s.verdicts)-1)]
	s.calls++
	return func() (string, []string) {
		if v == trt.TelemetryOK {
			return v, nil
		}
		return v, []string{"throttled: sw_thermal_slowdown"}
	}, nil
}

func TestBenchmarkTelemetryVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		verdicts   []string
		wantRuns   int
		wantMark   string
		wantFailed bool
	}{
		{"clean", []string{trt.TelemetryOK}, 1, trt.TelemetryOK, false},
		{"throttled once, then clean", []string{trt.TelemetryRerun, trt.TelemetryOK}, 2, trt.TelemetryOK, false},
		{"throttled every time is marked", []string{trt.TelemetryRerun}, 3, trt.TelemetryRerun, false},
		{"device errors reject", []string{trt.TelemetryReject}, 1, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, nil)
			tel := &scriptedTelemetry{verdicts: tc.verdicts}
			be := trt.New(trt.Options{Executable: trtreplay.Executable(t), Env: []string{r.env}, Telemetry: tel.watch})
			req := r.request("trt:fp16", filepath.Join(t.TempDir(), "work"))
			req.Env = []string{"CUDA_VISIBLE_DEVICES=GPU-1234"}
			eng, err := be.Build(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			before := len(r.argv())
			st, err := eng.Benchmark(context.Background(), 1, r.samples[0].Inputs, backend.OutputSpecsLike(r.samples[0].Outputs), backend.DefaultStopRule())
			runs := len(r.argv()) - before
			if runs != tc.wantRuns || tel.calls != tc.wantRuns {
				t.Fatalf("trtexec ran %d times, telemetry watched %d, want %d", runs, tel.calls, tc.wantRuns)
			}
			if !strings.Contains(strings.Join(tel.envs[0], " "), "CUDA_VISIBLE_DEVICES=GPU-1234") {
				t.Errorf("telemetry watched %v, not the task's GPU", tel.envs[0])
			}
			if tc.wantFailed {
				var f *backend.Failure
				if !errors.As(err, &f) || f.Class != backend.FailInfrastructure || !strings.Contains(err.Error(), "GPU reported errors") {
					t.Fatalf("got %v, want an infrastructure failure naming the GPU errors", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Telemetry != tc.wantMark {
				t.Fatalf("stats marked %q, want %q", st.Telemetry, tc.wantMark)
			}
			if tc.wantMark == trt.TelemetryRerun && len(st.TelemetryProblems) == 0 {
				t.Fatal("a throttled measurement carries no problems")
			}
		})
	}
}
