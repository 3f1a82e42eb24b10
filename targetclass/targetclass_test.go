package targetclass

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSuggest(t *testing.T) {
	known := []string{"cpu", "gpu.h100", "gpu.h100sxm", "gpu.l4"}
	for _, tc := range []struct{ class, want string }{
		{"gpu.h10", "gpu.h100"},
		{"gpu.h100sx", "gpu.h100sxm"},
		{"cpus", "cpu"},
		{"gpu.l40", "gpu.l4"},
		{"tpu.v5", ""}, // nothing close: no guess
		{"x", ""},
		{strings.Repeat("a", 10000), ""},
	} {
		if got := Suggest(tc.class, known); got != tc.want {
			t.Errorf("Suggest(%.20q) = %q, want %q", tc.class, got, tc.want)
		}
	}
}

func TestJudge(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	r := &Registry{
		Declared: []string{"gpu.l4"},
		Seen: map[string]time.Time{
			"cpu":      now.Add(-10 * time.Second),
			"gpu.h100": now.Add(-time.Hour),
			"gpu.old":  {}, // registered before the registry kept times
		},
		Now: now,
	}
	for _, tc := range []struct {
		class   string
		refused bool
		waiting string
	}{
		{"cpu", false, ""},
		{"gpu.h100", false, "waiting for a worker of class gpu.h100 (none live; last seen 2026-12-02T07:00:00Z)"},
		{"gpu.l4", false, "waiting for a worker of class gpu.l4 (none live; never seen)"},
		{"gpu.old", false, "waiting for a worker of class gpu.old (none live; last seen at an unrecorded time)"},
		{"gpu.h10", true, ""},
	} {
		v, err := r.Judge(tc.class)
		var refused *RefusedError
		if errors.As(err, &refused) != tc.refused {
			t.Errorf("%s: err %v, want refused %v", tc.class, err, tc.refused)
			continue
		}
		if tc.refused {
			if want := `target class "gpu.h10": no worker has served it and it is not declared; did you mean gpu.h100? (known classes: cpu, gpu.h100, gpu.l4, gpu.old;`; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("%s: %q, want it to start %q", tc.class, err, want)
			}
			continue
		}
		if got := v.Waiting(); got != tc.waiting {
			t.Errorf("%s: Waiting() = %q, want %q", tc.class, got, tc.waiting)
		}
	}
}

func TestParseList(t *testing.T) {
	got := ParseList(" cpu, gpu.l4,,cpu ,")
	if strings.Join(got, "|") != "cpu|gpu.l4" {
		t.Errorf("ParseList = %q", got)
	}
}

func TestCPUIsAlwaysDeclared(t *testing.T) {
	r := &Registry{Now: time.Now()}
	v, err := r.Judge(CPU)
	if err != nil || v.Waiting() != "waiting for a worker of class cpu (none live; never seen)" {
		t.Errorf("cpu with no registry: %v, %q", err, v.Waiting())
	}
	if _, err := r.Judge("cpus"); err == nil || !strings.Contains(err.Error(), "did you mean cpu?") {
		t.Errorf("cpus: %v", err)
	}
}

// Wait is nil for a live class and carries the waiting line and the last
// heartbeat otherwise (status -o json's waiting_for_class).
func TestWait(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	r := &Registry{Declared: []string{"gpu.l4"}, Seen: map[string]time.Time{"cpu": now, "gpu.h100": now.Add(-time.Hour)}, Now: now}
	for _, tc := range []struct {
		class string
		want  *Wait
	}{
		{"cpu", nil},
		{"gpu.h100", &Wait{Class: "gpu.h100", LastSeen: now.Add(-time.Hour), ServedBefore: true,
			Message: "waiting for a worker of class gpu.h100 (none live; last seen 2026-12-02T07:00:00Z)"}},
		{"gpu.l4", &Wait{Class: "gpu.l4", Declared: true, Message: "waiting for a worker of class gpu.l4 (none live; never seen)"}},
	} {
		v, err := r.Judge(tc.class)
		if err != nil {
			t.Fatal(err)
		}
		got := v.Wait()
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("%s: Wait() = %+v, want %+v", tc.class, got, tc.want)
		}
	}
}
