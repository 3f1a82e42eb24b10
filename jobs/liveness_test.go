package jobs

import (
	"strings"
	"testing"
	"time"
)

// A task is wedged only once it has run more than the budget past its
// deadline; a long task within its deadline, or one without a deadline, is
// alive.
func TestInFlightWedged(t *testing.T) {
	now := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		deadline time.Time
		wedged   bool
	}{
		{"within its deadline", now.Add(time.Hour), false},
		{"past it, within the budget", now.Add(-30 * time.Second), false},
		{"past it by more than the budget", now.Add(-2 * time.Minute), true},
		{"no deadline", time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f inFlight
			f.tasks = map[int]flight{0: {typ: TypeGraph, id: "run:g", start: now.Add(-time.Hour), deadline: tt.deadline}}
			err := f.wedged(now, time.Minute)
			if (err != nil) != tt.wedged {
				t.Fatalf("wedged = %v, want wedged %v", err, tt.wedged)
			}
			if err != nil && !strings.Contains(err.Error(), "run:g") {
				t.Errorf("%v does not name the task", err)
			}
		})
	}
}
