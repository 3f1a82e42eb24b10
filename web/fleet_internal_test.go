package web

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/history/historytest"
)

// The fleet page reads the histories of platforms, not of target classes:
// finalize files each entry under both, and a class's head says it is
// one, so its entries are not read only for its column to be dropped. A
// class head written before heads said so is read, and its column
// dropped, as before.
func TestFleetPageSkipsClassHistories(t *testing.T) {
	ctx := context.Background()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	for m := range 3 {
		model := fmt.Sprintf("team.m%d", m)
		for d := range 2 {
			created := t0.Add(time.Duration(d) * 24 * time.Hour)
			g := history.Graph{Name: "0", Status: history.GraphDone, Candidate: "ort:cpu:basic",
				Bench: &history.Bench{BatchSize: 1, Samples: 100, MeanMs: 1, P50Ms: 1, P90Ms: 1.1, P99Ms: 1.2, CV: 0.05, Throughput: 1000, Stable: true}}
			historytest.Record(t, store, &history.Entry{Format: history.Format, Model: model, Platform: "cpu-plat", Target: "cpu",
				Run: fmt.Sprintf("%s-n%d", model, d), Created: created, FinalizedAt: created.Add(time.Hour), Status: history.GraphDone, Device: "cpu",
				StateKey: artifacts.BlobKey(strings.Repeat("0", 64)), StateSHA256: strings.Repeat("0", 64), Graphs: []history.Graph{g}})
		}
	}
	// team.m2's class head as written before heads said whether they are a class's.
	h, _, err := history.ReadHead(ctx, store, "team.m2", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	h.Class = false
	if err := artifacts.PutJSON(ctx, store, history.HeadKey("team.m2", "cpu"), h); err != nil {
		t.Fatal(err)
	}
	byModel, err := fleetKeys(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string][]string{"team.m0": {"cpu-plat"}, "team.m1": {"cpu-plat"}, "team.m2": {"cpu", "cpu-plat"}} {
		if got := slices.Sorted(maps.Keys(byModel[model])); !slices.Equal(got, want) {
			t.Errorf("%s: histories read %v, want %v", model, got, want)
		}
	}
	page, err := fleet(ctx, store, byModel)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(page.Platforms, []string{"cpu-plat"}) || len(page.Classes) != 1 || !slices.Equal(page.Classes[0], []string{"cpu"}) {
		t.Fatalf("columns %v labelled %v, want cpu-plat labelled cpu", page.Platforms, page.Classes)
	}
	for _, r := range page.Rows {
		if len(r.Cells) != 1 || r.Cells[0] == nil || r.Cells[0].Entry.Run != r.Model+"-n1" {
			t.Errorf("row %s: %+v, want its newest entry", r.Model, r.Cells)
		}
	}
}
