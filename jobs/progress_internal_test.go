package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/runstate"
)

// TestProgressStopBeforeCompletion: an attempt's completion stops its
// reports (a scheduled write is cancelled, none is scheduled after) and
// looks for a progress record only where one may be: the attempt wrote
// one, or an earlier attempt may have left one.
func TestProgressStopBeforeCompletion(t *testing.T) {
	for _, tt := range []struct {
		name    string
		n       int
		written bool
		want    bool
	}{
		{"first attempt, nothing written", 1, false, false},
		{"first attempt, written", 1, true, true},
		{"a later attempt: an earlier one may have died with a record", 2, false, true},
		{"not numbered", 0, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var r progressRecord
			r.written = tt.written
			r.timer = time.AfterFunc(time.Hour, func() {})
			if got := r.stop(tt.n); got != tt.want {
				t.Errorf("stop(%d) with written %v = %v, want %v", tt.n, tt.written, got, tt.want)
			}
			if r.timer != nil || !r.ended {
				t.Errorf("after stop: timer %v, ended %v: want no write scheduled and the reports ended", r.timer, r.ended)
			}
		})
	}
	// A phase reported after the stop schedules no write.
	w := &Worker{cfg: WorkerConfig{Observer: NopObserver{}}, slots: newSlotPool([]slot{{platform: "p"}})}
	a := &attempt{n: 1}
	a.progress.stop(a.n)
	w.report(context.Background(), a, runstate.PhaseUpload, nil)
	if a.progress.timer != nil {
		t.Error("a report after the stop scheduled a write")
	}
}
