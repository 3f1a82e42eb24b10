package artifacts_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/state"
)

// A fetch that fails part way (the caller gives up half way through a
// large engine, or an engine's bytes do not match its digest) leaves no
// file and no folder: neither the destination nor a staged part of it
// beside it; the next fetch lays out the whole state. The large engine is
// downloaded in ranges from S3 and as one stream from a directory, both
// written back to disk as they land.
func TestFetchFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	smallPath, small := randomFile(t, src, 1<<20)
	bigPath, big := randomFile(t, src, 70<<20+321)
	bigData, err := os.ReadFile(bigPath)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			for _, f := range []struct {
				path string
				ref  artifacts.Ref
			}{{smallPath, small}, {bigPath, big}} {
				if _, err := artifacts.PutFileAs(ctx, s, f.path, f.ref); err != nil {
					t.Fatal(err)
				}
			}
			putState := func(run string, bigRef artifacts.Ref) {
				t.Helper()
				st := state.State{Format: state.StateFormat, Model: "m", Platform: "p", Target: "p", Run: run, Status: "done"}
				for g, r := range map[string]artifacts.Ref{"0": small, "1": bigRef} {
					st.Graphs = append(st.Graphs, state.StateGraph{Name: g, Engine: &state.EngineRef{Key: r.Key(), File: "model.plan", SHA256: r.SHA256, Size: r.Size}})
				}
				if err := artifacts.PutJSON(ctx, s, artifacts.StateKey(run), st); err != nil {
					t.Fatal(err)
				}
			}
			putState("good", big)
			lying := big
			lying.SHA256 = small.SHA256 // the store holds other bytes under that digest
			lying.Size = big.Size
			putState("lying", lying)

			parent := t.TempDir()
			dest := filepath.Join(parent, "fetched")
			nothingLeft := func(what string) {
				t.Helper()
				if entries, _ := os.ReadDir(parent); len(entries) != 0 {
					var names []string
					for _, e := range entries {
						names = append(names, e.Name())
					}
					t.Fatalf("%s left %v beside the destination", what, names)
				}
			}

			cut, cancel := context.WithCancel(ctx)
			defer cancel()
			var moved atomic.Int64
			var once sync.Once
			cut = artifacts.WithProgress(cut, progressFunc(func(n int64) {
				if moved.Add(n) >= big.Size/2 {
					once.Do(cancel)
				}
			}))
			if _, err := artifacts.Fetch(cut, s, "m", "p", "good", dest); !errors.Is(err, context.Canceled) {
				t.Fatalf("a fetch cut off half way = %v, want context.Canceled", err)
			}
			nothingLeft("a fetch cut off half way")

			if _, err := artifacts.Fetch(ctx, s, "m", "p", "lying", dest); err == nil {
				t.Fatal("a fetch of an engine whose bytes do not match its digest succeeded")
			}
			nothingLeft("a fetch of a corrupt engine")

			got, err := artifacts.Fetch(ctx, s, "m", "p", "good", dest)
			if err != nil {
				t.Fatalf("the fetch after the failures: %v", err)
			}
			if b, err := os.ReadFile(got.Engines["1"]); err != nil || !bytes.Equal(b, bigData) {
				t.Fatalf("the fetched engine differs from the blob (%d bytes, %v)", len(b), err)
			}
		})
	}
}
