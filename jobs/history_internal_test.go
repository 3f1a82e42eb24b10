package jobs

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/runstate"
)

// countPuts counts writes and widens the window between a look-up and a
// write, as a slow S3 does.
type countPuts struct {
	artifacts.Store
	mu   sync.Mutex
	puts map[string]int
}

func (s *countPuts) Stat(ctx context.Context, key string) (artifacts.ObjectInfo, error) {
	time.Sleep(10 * time.Millisecond)
	return s.Store.Stat(ctx, key)
}

func (s *countPuts) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	s.mu.Lock()
	s.puts[key]++
	s.mu.Unlock()
	return s.Store.Put(ctx, key, r, size)
}

// Finalize attempts of one run racing (a retry, an inline finalize and its
// safety-net task) append its history entry once: the first write stays,
// whatever the others' finalized_at says.
func TestConcurrentFinalizesAppendTheHistoryOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	runs := testRuns(t)
	local, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := &countPuts{Store: local, puts: map[string]int{}}
	created := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := &history.Entry{Format: history.Format, Model: "m", Platform: "cpu-x", Target: "cpu", Run: "m-1", Created: created,
				FinalizedAt: created.Add(time.Duration(i) * time.Second), Status: runstate.RunDone, Device: "cpu",
				StateKey: artifacts.BlobKey(strings.Repeat("a", 64)), StateSHA256: strings.Repeat("a", 64)}
			if err := appendHistory(ctx, runs, store, e, encodedEntry(t, e)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, where := range []string{"cpu-x", "cpu"} {
		keys, err := history.Keys(ctx, store, "m", where)
		if err != nil || len(keys) != 1 {
			t.Fatalf("%s: keys %v %v, want one entry", where, keys, err)
		}
		e, err := history.Read(ctx, store, keys[0])
		if err != nil || e.Platform != "cpu-x" || store.puts[keys[0]] != 1 {
			t.Fatalf("%s: %+v %v, written %d times", where, e, err, store.puts[keys[0]])
		}
	}
}

// encodedEntry is e as finalize hands it to appendHistory: encoded as
// AppendAt encodes it, in a spool.
func encodedEntry(t *testing.T, e *history.Entry) *spool {
	t.Helper()
	data, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	sp := newSpools(t.TempDir()).new("history.json")
	if _, err := sp.Write(append(data, '\n')); err != nil {
		t.Fatal(err)
	}
	return sp
}
