package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/metrics"
)

// Each Observer call moves its series, and only its own; the series known
// in advance are there, at zero, before anything happens.
func TestWorkerSeries(t *testing.T) {
	w := metrics.NewWorker([]string{"cpu", "gpu.h100"})
	before := gathered(t, w)
	for _, s := range []string{
		`tunefleet_tasks_started_total{queue="gpu.h100"} 0`,
		`tunefleet_tasks_finished_total{failure_class="",outcome="handed_back",queue="cpu"} 0`,
		`tunefleet_phase_duration_seconds_count{phase="download"} 0`,
		`tunefleet_phase_duration_seconds_count{phase="upload"} 0`,
		`tunefleet_bytes_transferred_total{direction="up"} 0`,
		`tunefleet_result_index_lookups_total{result="miss"} 0`,
		`tunefleet_worker_broken 0`,
		`tunefleet_queue_wait_seconds_count{queue="gpu.h100"} 0`,
	} {
		if !strings.Contains(before, s+"\n") {
			t.Errorf("a fresh worker does not export %s", s)
		}
	}
	tests := []struct {
		name string
		do   func()
		want []string
	}{
		{"task", func() {
			w.TaskStarted("cpu")
			w.TaskFinished("cpu", jobs.OutcomeFailed, "wrong_answer", 1500*time.Millisecond)
		}, []string{
			`tunefleet_tasks_started_total{queue="cpu"} 1`,
			`tunefleet_tasks_finished_total{failure_class="wrong_answer",outcome="failed",queue="cpu"} 1`,
			`tunefleet_task_duration_seconds_sum{queue="cpu"} 1.5`,
			`tunefleet_task_duration_seconds_count{queue="cpu"} 1`,
		}},
		{"phase", func() { w.PhaseDone("build", 250*time.Millisecond) }, []string{
			`tunefleet_phase_duration_seconds_sum{phase="build"} 0.25`,
			`tunefleet_phase_duration_seconds_bucket{phase="build",le="0.405"} 1`,
		}},
		{"slots", func() { w.Slots("gpu", 3, 8) }, []string{`tunefleet_slots_busy{kind="gpu"} 3`, `tunefleet_slots_total{kind="gpu"} 8`}},
		{"hand-back", func() { w.HandedBack(); w.HandedBack() }, []string{`tunefleet_handbacks_total 2`}},
		{"bytes", func() { w.Transferred(jobs.DirectionDown, 1<<20) }, []string{`tunefleet_bytes_transferred_total{direction="down"} 1.048576e+06`}},
		{"lookup", func() { w.ResultIndexLookup(true) }, []string{`tunefleet_result_index_lookups_total{result="hit"} 1`}},
		{"broken", func() { w.SetBroken(true) }, []string{`tunefleet_worker_broken 1`}},
		{"queue wait", func() { w.QueueWait("cpu", 3*time.Second) }, []string{
			`tunefleet_queue_wait_seconds_sum{queue="cpu"} 3`,
			`tunefleet_queue_wait_seconds_bucket{queue="cpu",le="4.050000000000001"} 1`,
			`tunefleet_queue_wait_seconds_bucket{queue="cpu",le="1.35"} 0`,
		}},
		{"failed candidate", func() { w.CandidateFailed("build"); w.CandidateFailed("build") }, []string{`tunefleet_candidates_failed_total{failure_class="build"} 2`}},
		// Two tasks: one downloads then builds, one waits for a slot, and
		// one more came and went; the gauge counts those in each phase now.
		{"tasks in phase", func() {
			w.TaskPhase("cpu", "", "download")
			w.TaskPhase("cpu", "download", "build")
			w.TaskPhase("cpu", "", "waiting")
			w.TaskPhase("cpu", "", "upload")
			w.TaskPhase("cpu", "upload", "")
		}, []string{
			`tunefleet_tasks_in_phase{phase="build",queue="cpu"} 1`,
			`tunefleet_tasks_in_phase{phase="waiting",queue="cpu"} 1`,
			`tunefleet_tasks_in_phase{phase="download",queue="cpu"} 0`,
			`tunefleet_tasks_in_phase{phase="upload",queue="cpu"} 0`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.do()
			got := gathered(t, w)
			for _, s := range tt.want {
				if !strings.Contains(got, s+"\n") {
					t.Errorf("after %s, /metrics lacks %s", tt.name, s)
				}
			}
		})
	}
}

// gathered is what GET /metrics answers, in the text format.
func gathered(t *testing.T, w *metrics.Worker) string {
	t.Helper()
	rec := httptest.NewRecorder()
	w.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}
