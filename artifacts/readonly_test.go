package artifacts_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/state"
)

// readOnly is a store whose credentials may only read: every write fails
// as S3 answers a read-only key (root ignores file permissions, so a
// chmod'ed directory would not show it in tests run as root).
type readOnly struct{ artifacts.Store }

var errDenied = errors.New("AccessDenied: read-only credentials")

func (readOnly) Put(context.Context, string, io.Reader, int64) error { return errDenied }
func (readOnly) Delete(context.Context, string) error                { return errDenied }

// finalizedRun stores what a finished run leaves for deploy tooling: its
// engine, runs/<run>/state.json, the state blob and (when latest)
// latest.json under the platform and the target class.
func finalizedRun(t *testing.T, s artifacts.Store, model, run string, submitted time.Time, latest bool) artifacts.Ref {
	t.Helper()
	ctx := t.Context()
	eng, err := artifacts.PutBytes(ctx, s, []byte("engine of "+run))
	if err != nil {
		t.Fatal(err)
	}
	st := state.State{
		Format: state.StateFormat, Model: model, Platform: "cpu-x86-ort1.24.1", Target: "cpu", Run: run, Status: "done",
		Graphs:     []state.StateGraph{{Name: "0", Engine: &state.EngineRef{Key: eng.Key(), File: "model.onnx", SHA256: eng.SHA256, Size: eng.Size}}},
		Provenance: state.Provenance{SubmittedAt: submitted, FinalizedAt: submitted.Add(time.Minute)},
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, artifacts.StateKey(run), strings.NewReader(string(data)), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	ref, err := artifacts.PutBytes(ctx, s, data)
	if err != nil {
		t.Fatal(err)
	}
	if latest {
		for _, p := range []string{st.Platform, st.Target} {
			if err := artifacts.PutJSON(ctx, s, artifacts.LatestKey(model, p), state.Latest{
				Format: state.LatestFormat, Model: model, Platform: p, Run: run, StateKey: ref.Key(), StateSHA256: ref.SHA256, SubmittedAt: submitted,
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ref
}

// Fetch, FetchCheckpoint's resolution and ReadState only read: they work
// with credentials that may not write (issue 8, item 6).
func TestFetchWithReadOnlyCredentials(t *testing.T) {
	t.Parallel()
	l := newLocal(t)
	finalizedRun(t, l, "m", "m-000000000001", time.Unix(1e9, 0), true)
	ro := readOnly{l}
	got, err := artifacts.Fetch(t.Context(), ro, "m", "cpu", "", filepath.Join(t.TempDir(), "deploy"))
	if err != nil {
		t.Fatalf("Fetch through read-only credentials: %v", err)
	}
	if got.Run != "m-000000000001" {
		t.Fatalf("fetched run %s", got.Run)
	}
	if _, _, err := artifacts.ReadState(t.Context(), ro, "m", "cpu", "m-000000000001"); err != nil {
		t.Fatalf("ReadState --run through read-only credentials: %v", err)
	}
}

// dirTimes records every directory's modification time under root: a
// file created and removed again (a probe) still changes its directory's.
func dirTimes(t *testing.T, root string) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			out[p] = fi.ModTime()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Opening a local store to read (what fetch and status do) writes nothing
// in it: no probe file, no directory. Before, Check created and removed a
// probe, which read-only deploy credentials (a read-only mount) refuse.
func TestOpenExistingWritesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := artifacts.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	finalizedRun(t, l, "m", "m-000000000001", time.Unix(1e9, 0), true)
	l.Close()
	before := dirTimes(t, dir)
	time.Sleep(10 * time.Millisecond) // file systems with coarse timestamps
	s, err := artifacts.OpenExisting(t.Context(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.(io.Closer).Close()
	if _, err := artifacts.Fetch(t.Context(), s, "m", "cpu", "", filepath.Join(t.TempDir(), "deploy")); err != nil {
		t.Fatal(err)
	}
	after := dirTimes(t, dir)
	for p, mt := range before {
		if !after[p].Equal(mt) {
			t.Errorf("%s was written to (mtime %v -> %v)", p, mt, after[p])
		}
	}
	if len(after) != len(before) {
		t.Errorf("directories before %d, after %d", len(before), len(after))
	}
	// And a directory that cannot be listed is still refused, readably.
	if _, err := artifacts.OpenExisting(t.Context(), "file://"+filepath.Join(dir, "nope")); !errors.Is(err, artifacts.ErrNotExist) {
		t.Errorf("OpenExisting of a missing directory = %v", err)
	}
}
