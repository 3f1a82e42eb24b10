package artifacts_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/state"
)

// When latest.json cannot be followed, the message says which part is
// gone and names the runs that `fetch --run` can still take (issue 8,
// item 6). Before, a deleted latest.json said "nothing finalized
// successfully yet" although runs were there, and a missing state blob did
// not mention --run.
func TestLatestGoneNamesTheRuns(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		setup   func(t *testing.T, s artifacts.Store)
		want    []string
		notWant []string
	}{
		{"latest deleted", func(t *testing.T, s artifacts.Store) {
			finalizedRun(t, s, "m", "m-00000000000a", t0, false)
			finalizedRun(t, s, "m", "m-00000000000b", t0.Add(time.Hour), true)
			failedRun(t, s, "m", "m-00000000000c", t0.Add(2*time.Hour))
			finalizedRun(t, s, "m-other", "m-other-00000000000d", t0.Add(3*time.Hour), false) // another model
			for _, p := range []string{"cpu", "cpu-x86-ort1.24.1"} {
				if err := s.Delete(t.Context(), artifacts.LatestKey("m", p)); err != nil {
					t.Fatal(err)
				}
			}
		}, []string{"models/m/cpu/latest.json is missing", "m-00000000000b", "m-00000000000a", "--run m-00000000000b"},
			[]string{"nothing finalized", "m-00000000000c", "m-other"}},
		{"nothing finalized", func(t *testing.T, s artifacts.Store) {
			failedRun(t, s, "m", "m-00000000000c", t0)
		}, []string{"nothing finalized successfully yet"}, []string{"--run"}},
		{"state blob gone", func(t *testing.T, s artifacts.Store) {
			ref := finalizedRun(t, s, "m", "m-00000000000b", t0, true)
			if err := s.Delete(t.Context(), ref.Key()); err != nil {
				t.Fatal(err)
			}
		}, []string{"latest.json", "m-00000000000b", blobKeyPrefix, "fetch --run m-00000000000b"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newLocal(t)
			tt.setup(t, s)
			_, err := artifacts.Fetch(t.Context(), readOnly{s}, "m", "cpu", "", filepath.Join(t.TempDir(), "deploy"))
			if err == nil || !errors.Is(err, artifacts.ErrNotExist) {
				t.Fatalf("Fetch = %v, want an error wrapping ErrNotExist", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q says %q", err, w)
				}
			}
		})
	}
}

// blobKeyPrefix starts every blob key, the state blob's among them.
const blobKeyPrefix = "blobs/sha256/"

// failedRun stores the state of a run that finalized as failed.
func failedRun(t *testing.T, s artifacts.Store, model, run string, submitted time.Time) {
	t.Helper()
	if err := artifacts.PutJSON(t.Context(), s, artifacts.StateKey(run), state.State{
		Format: state.StateFormat, Model: model, Platform: "cpu-x86-ort1.24.1", Target: "cpu", Run: run, Status: "failed",
		Provenance: state.Provenance{SubmittedAt: submitted},
	}); err != nil {
		t.Fatal(err)
	}
}
