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

// TestProgressWritesSpaced: the first change is written progressDelay
// after it; after a write, the next no sooner than progressEvery after it.
func TestProgressWritesSpaced(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tt := range []struct {
		name string
		last time.Time
		now  time.Time
		want time.Duration
	}{
		{"never written", time.Time{}, t0, progressDelay},
		{"written just now", t0, t0, progressEvery},
		{"written 0.5 s ago", t0, t0.Add(500 * time.Millisecond), 500 * time.Millisecond},
		{"written 0.9 s ago: the delay still holds", t0, t0.Add(900 * time.Millisecond), progressDelay},
		{"written long ago", t0, t0.Add(time.Minute), progressDelay},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := progressRecord{last: tt.last}
			if got := r.nextWrite(tt.now); got != tt.want {
				t.Errorf("nextWrite = %v, want %v", got, tt.want)
			}
		})
	}
}
