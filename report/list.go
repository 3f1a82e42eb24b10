package report

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/state"
)

// Listed is one nightly as the nightly list shows it: its plan's figures,
// and its summary's where the morning report was written.
type Listed struct {
	Nightly      string    `json:"nightly"`
	FleetDigest  string    `json:"fleet_digest"`
	CreatedAt    time.Time `json:"created_at"`
	Models       int       `json:"models"`  // distinct models in the plan
	Entries      int       `json:"entries"` // model × target
	Submitted    int       `json:"submitted"`
	Unchanged    int       `json:"unchanged"`
	NotSubmitted int       `json:"not_submitted"`
	// Totals are summary.json's (nil: no morning report written yet).
	Totals *Totals `json:"totals,omitempty"`
}

// List reads every nightly of the store, newest first: its plan and, where
// there is one, its summary (what the last morning report found; the
// nightly page summarizes anew).
func List(ctx context.Context, store artifacts.Store) ([]Listed, error) {
	keys, err := store.List(ctx, "nightly/")
	if err != nil {
		return nil, fmt.Errorf("list nightly/ in %s: %w", store, err)
	}
	var ids []string
	hasSummary := map[string]bool{}
	for _, k := range keys {
		id, file, ok := strings.Cut(strings.TrimPrefix(k, "nightly/"), "/")
		if !ok || CheckNightly(id) != nil {
			continue
		}
		switch file {
		case "plan.json":
			ids = append(ids, id)
		case "summary.json":
			hasSummary[id] = true
		}
	}
	out := make([]Listed, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, id := range ids {
		g.Go(func() error {
			l, err := listed(gctx, store, id, hasSummary[id])
			out[i] = l
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].Nightly > out[j].Nightly
	})
	return out, nil
}

func listed(ctx context.Context, store artifacts.Store, id string, summary bool) (Listed, error) {
	plan, err := ReadPlan(ctx, store, id)
	if err != nil {
		return Listed{}, err
	}
	l := Listed{Nightly: id, FleetDigest: plan.FleetDigest, CreatedAt: plan.CreatedAt, Entries: len(plan.Entries)}
	models := map[string]bool{}
	for _, e := range plan.Entries {
		models[e.Model] = true
		switch e.Outcome {
		case state.OutcomeSubmitted:
			l.Submitted++
		case state.OutcomeUnchanged:
			l.Unchanged++
		default:
			l.NotSubmitted++
		}
	}
	l.Models = len(models)
	if !summary {
		return l, nil
	}
	var s Summary
	switch err := artifacts.GetJSON(ctx, store, SummaryKey(id), &s); {
	case errors.Is(err, artifacts.ErrNotExist):
	case err != nil:
		return l, fmt.Errorf("read the summary of nightly %s: %w", id, err)
	default:
		l.Totals = &s.Totals
	}
	return l, nil
}

// Show summarizes a nightly now, from its plan and its runs' history
// entries (writing nothing): what the nightly page and `producer nightly
// show` print. An id with no plan gives an error wrapping ErrBadNightly.
func Show(ctx context.Context, store artifacts.Store, nightly string) (*Summary, error) {
	plan, err := ReadPlan(ctx, store, nightly)
	if err != nil {
		return nil, err
	}
	return Summarize(ctx, store, plan)
}
