package history_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
)

// appendN writes n entries of model m on platform p, a day apart, runs
// r000, r001, …; with head, each is named in the head as finalize does.
func appendN(t *testing.T, store artifacts.Store, n int, head bool) {
	t.Helper()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	for i := range n {
		e := entry(fmt.Sprintf("r%03d", i), "p", done("0", "a", bench(1, 1, 1, 1, 0.1)))
		e.Created = t0.Add(time.Duration(i) * 24 * time.Hour)
		if _, err := history.Append(ctx, store, e); err != nil {
			t.Fatal(err)
		}
		if head {
			if err := history.AddToHead(ctx, store, "m", "p", e.Key(), "p"); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestHeadNamesTheNewestEntries(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		n    int
		// head: entries named in the head as written; seeded: the head is
		// started by the last entry's finalize over a history without one.
		head, seeded bool
		run          string
		wantPrev     string
		wantErr      error
	}{
		{"short history, newest run", 3, true, false, "r002", "r001", nil},
		{"short history, first run: nothing before it", 3, true, false, "r000", "", nil},
		{"short history, a run not finalized: no entry, no listing", 3, true, false, "r999", "", history.ErrNoEntry},
		{"long history, newest run", 40, true, false, "r039", "r038", nil},
		{"long history, the head's oldest: compared through the listing", 40, true, false, fmt.Sprintf("r%03d", 40-history.HeadDepth), fmt.Sprintf("r%03d", 39-history.HeadDepth), nil},
		{"long history, an old run: not recent", 40, true, false, "r003", "", history.ErrNotRecent},
		{"long history, no head: the listing", 40, false, false, "r003", "r002", nil},
		{"a head started over an old history", 40, false, true, "r039", "r038", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := artifacts.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			appendN(t, store, tc.n, tc.head)
			if tc.seeded {
				keys, err := history.Keys(ctx, store, "m", "p")
				if err != nil {
					t.Fatal(err)
				}
				if err := history.AddToHead(ctx, store, "m", "p", keys[len(keys)-1], "p"); err != nil {
					t.Fatal(err)
				}
			}
			if h, ok, err := history.ReadHead(ctx, store, "m", "p"); err != nil || ok != (tc.head || tc.seeded) ||
				ok && (len(h.Keys) != min(tc.n, history.HeadDepth) || h.Complete != (tc.n <= history.HeadDepth) || history.RunOf(h.Keys[len(h.Keys)-1]) != fmt.Sprintf("r%03d", tc.n-1)) {
				t.Fatalf("head %+v %v %v", h, ok, err)
			}
			// The run's entry alone: the same entry, or the same error.
			if e, err := history.FindRecentEntry(ctx, store, "m", "p", tc.run); tc.wantErr != nil && !errors.Is(err, tc.wantErr) ||
				tc.wantErr == nil && (err != nil || e.Run != tc.run) {
				t.Errorf("FindRecentEntry %s: %+v %v, want error %v", tc.run, e, err, tc.wantErr)
			}
			cur, prev, err := history.FindRecent(ctx, store, "m", "p", tc.run)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("FindRecent %s: %v, want %v", tc.run, err, tc.wantErr)
				}
				return
			}
			if err != nil || cur.Run != tc.run || (prev == nil) != (tc.wantPrev == "") || prev != nil && prev.Run != tc.wantPrev {
				t.Fatalf("FindRecent %s: %+v %+v %v, want previous %q", tc.run, cur, prev, err, tc.wantPrev)
			}
			keys, err := history.Recent(ctx, store, "m", "p", 3)
			if err != nil || len(keys) != min(3, tc.n) || history.RunOf(keys[len(keys)-1]) != fmt.Sprintf("r%03d", tc.n-1) {
				t.Fatalf("Recent: %v %v", keys, err)
			}
			list, err := history.List(ctx, store, "m", "p", 3)
			if err != nil || len(list) != min(3, tc.n) || list[len(list)-1].Run != fmt.Sprintf("r%03d", tc.n-1) {
				t.Fatalf("List limit 3: %d entries, %v", len(list), err)
			}
		})
	}
}

// A repeated finalize (the entry there, the head naming it) leaves the
// head as it is; one cut short before its head adds the entry later,
// in time order.
func TestAddToHeadIsIdempotentAndOrdered(t *testing.T) {
	ctx := context.Background()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, store, 3, true)
	keys, _ := history.Keys(ctx, store, "m", "p")
	before, _, _ := history.ReadHead(ctx, store, "m", "p")
	if err := history.AddToHead(ctx, store, "m", "p", keys[1], "p"); err != nil {
		t.Fatal(err)
	}
	after, _, _ := history.ReadHead(ctx, store, "m", "p")
	if fmt.Sprint(before.Keys) != fmt.Sprint(after.Keys) || len(after.Keys) != 3 {
		t.Fatalf("head %v, then %v", before.Keys, after.Keys)
	}
	// An entry older than the head's newest, named late.
	e := entry("late", "p", done("0", "a", nil))
	e.Created = time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	if _, err := history.Append(ctx, store, e); err != nil {
		t.Fatal(err)
	}
	if err := history.AddToHead(ctx, store, "m", "p", e.Key(), "p"); err != nil {
		t.Fatal(err)
	}
	h, _, _ := history.ReadHead(ctx, store, "m", "p")
	var runs []string
	for _, k := range h.Keys {
		runs = append(runs, history.RunOf(k))
	}
	if fmt.Sprint(runs) != "[r000 r001 late r002]" {
		t.Fatalf("head runs %v, want time order", runs)
	}
}

// A damaged head is as if there were none: readers list the history, and
// the next finalize starts it again from the listing.
func TestDamagedHeadIsStartedAgain(t *testing.T) {
	ctx := context.Background()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, store, 3, true)
	if err := store.Put(ctx, history.HeadKey("m", "p"), strings.NewReader("{not json"), 9); err != nil {
		t.Fatal(err)
	}
	if cur, prev, err := history.FindRecent(ctx, store, "m", "p", "r002"); err != nil || cur.Run != "r002" || prev.Run != "r001" {
		t.Fatalf("FindRecent over a damaged head: %+v %+v %v", cur, prev, err)
	}
	keys, _ := history.Keys(ctx, store, "m", "p")
	if err := history.AddToHead(ctx, store, "m", "p", keys[2], "p"); err != nil {
		t.Fatal(err)
	}
	if h, ok, err := history.ReadHead(ctx, store, "m", "p"); err != nil || !ok || len(h.Keys) != 3 || !h.Complete {
		t.Fatalf("head after the next finalize: %+v %v %v", h, ok, err)
	}
}

// A head says whether its history is a target class's (its entries ran on
// a platform of another name), so that a view by platform skips it
// without reading an entry; a head written before it said so learns it at
// the history's next finalize, even one that adds nothing.
func TestHeadSaysWhetherItIsAClass(t *testing.T) {
	ctx := context.Background()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := entry("r000", "cpu-plat", done("0", "a", nil))
	e.Target = "cpu"
	for _, where := range []string{"cpu-plat", "cpu"} {
		key := history.Key("m", where, e.Created, e.Run)
		if _, err := history.AppendAt(ctx, store, key, e); err != nil {
			t.Fatal(err)
		}
		if err := history.AddToHead(ctx, store, "m", where, key, e.Platform); err != nil {
			t.Fatal(err)
		}
	}
	for where, want := range map[string]bool{"cpu-plat": false, "cpu": true} {
		keys, class, err := history.RecentOf(ctx, store, "m", where, 3)
		if err != nil || len(keys) != 1 || class != want {
			t.Errorf("RecentOf %s: %v, class %v, %v; want one key, class %v", where, keys, class, err, want)
		}
	}
	// A head as written before: no class. The same entry named again
	// (a repeated finalize) writes it.
	key := history.Key("m", "cpu", e.Created, e.Run)
	old := history.Head{Format: history.HeadFormat, Keys: []string{key}, Complete: true}
	if err := artifacts.PutJSON(ctx, store, history.HeadKey("m", "cpu"), old); err != nil {
		t.Fatal(err)
	}
	if _, class, _ := history.RecentOf(ctx, store, "m", "cpu", 3); class {
		t.Fatal("an old head says class")
	}
	if err := history.AddToHead(ctx, store, "m", "cpu", key, e.Platform); err != nil {
		t.Fatal(err)
	}
	if h, ok, err := history.ReadHead(ctx, store, "m", "cpu"); err != nil || !ok || !h.Class || len(h.Keys) != 1 {
		t.Fatalf("head after the repeated finalize: %+v %v %v", h, ok, err)
	}
}
