package web

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/parallel"
)

// compareDepth bounds how far back a fleet cell looks for the entry of
// the same target class to compare its newest with.
const compareDepth = 8

type fleetPage struct {
	Platforms []string
	Classes   [][]string // by Platforms: the target classes its cells' runs were for
	Rows      []fleetRow
}

type fleetRow struct {
	Model string
	Cells []*fleetCell // by Platforms; nil where the model has no history
}

// fleetCell is a model's newest entry on a platform.
type fleetCell struct {
	Class       string // ok | regressed | failed: the cell's colour
	Best        float64
	BestGraph   string
	Graphs      int
	Failed      int
	Regressions int
	// Speedup is the geometric mean over the graphs of each winner's
	// speedup over the baseline candidate (0: none measured).
	Speedup float64
	Entry   *history.Entry
	Detail  string // the changes, for the tooltip
	// LastGood is when the newest done run was submitted (zero: none
	// within compareDepth): its age is the cell's staleness.
	LastGood time.Time
}

func (s *Server) handleFleet(w http.ResponseWriter, r *http.Request) {
	byModel, err := fleetKeys(r.Context(), s.cfg.Store)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	page, err := fleet(r.Context(), s.cfg.Store, byModel)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	s.render(w, http.StatusOK, "fleet", "fleet", page)
}

// fleetKeys finds every model and platform with a history, and the keys
// of its newest entries: the models and each model's platforms listed one
// level at a time (artifacts.ListDirs), then each history's head (its
// listing where it has none). The page's cost is then the fleet's (models
// × platforms), not its history's: listing every key under models/, as it
// did, read every entry of every night (issue 35).
func fleetKeys(ctx context.Context, store artifacts.Store) (map[string]map[string][]string, error) {
	models, err := artifacts.ListDirs(ctx, store, "models/")
	if err != nil {
		return nil, fmt.Errorf("list the models in %s: %w", store, err)
	}
	found := make([]map[string][]string, len(models))
	err = parallel.ForEach(ctx, len(models), 8, func(ctx context.Context, i int) error {
		m := models[i]
		if artifacts.CheckPrefix("models/"+m+"/") != nil {
			return nil // not a name a history can have
		}
		wheres, err := artifacts.ListDirs(ctx, store, "models/"+m+"/")
		if err != nil {
			return fmt.Errorf("list the platforms of %s in %s: %w", m, store, err)
		}
		for _, p := range wheres {
			keys, class, err := history.RecentOf(ctx, store, m, p, compareDepth+1)
			if err != nil {
				return err
			}
			if class {
				// Each of its entries is filed under the platform it ran
				// on too, whose column shows it (dedupe drops a class's
				// column): reading them would double the page's reads.
				continue
			}
			if len(keys) > 0 {
				if found[i] == nil {
					found[i] = map[string][]string{}
				}
				found[i][p] = keys
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := map[string]map[string][]string{}
	for i, m := range models {
		if found[i] != nil {
			out[m] = found[i]
		}
	}
	return out, nil
}

// fleet builds the matrix: for every model and platform with a history,
// its newest entry compared with the one before it of the same class.
func fleet(ctx context.Context, store artifacts.Store, byModel map[string]map[string][]string) (fleetPage, error) {
	seen := map[string]bool{}
	var page fleetPage
	for _, ps := range byModel {
		for p := range ps {
			if !seen[p] {
				seen[p] = true
				page.Platforms = append(page.Platforms, p)
			}
		}
	}
	page.Platforms = sortedKeys(seen)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, m := range sortedKeys(byModel) {
		row := fleetRow{Model: m, Cells: make([]*fleetCell, len(page.Platforms))}
		for i, p := range page.Platforms {
			if keys := byModel[m][p]; len(keys) > 0 {
				g.Go(func() error {
					c, err := newestCell(gctx, store, keys)
					row.Cells[i] = c
					return err
				})
			}
		}
		page.Rows = append(page.Rows, row)
	}
	if err := g.Wait(); err != nil {
		return page, err
	}
	dedupe(&page)
	return page, nil
}

// dedupe drops the columns of target classes: finalize files each entry
// under its platform key and again under its class (for deploy tooling),
// so a class's column repeats its platform's. A column is a class's when
// none of its entries is of a platform of its name; each platform column
// is labelled with the classes its runs were for.
func dedupe(page *fleetPage) {
	var keep []int
	for i, p := range page.Platforms {
		own := false
		for _, r := range page.Rows {
			if c := r.Cells[i]; c != nil && c.Entry.Platform == p {
				own = true
			}
		}
		if own {
			keep = append(keep, i)
		}
	}
	if len(keep) == 0 { // entries of an older layout: show what there is
		return
	}
	var platforms []string
	var classes [][]string
	for _, i := range keep {
		platforms = append(platforms, page.Platforms[i])
		var cs []string
		for _, r := range page.Rows {
			if c := r.Cells[i]; c != nil && !slices.Contains(cs, c.Entry.Target) {
				cs = append(cs, c.Entry.Target)
			}
		}
		slices.Sort(cs)
		classes = append(classes, cs)
	}
	for j, r := range page.Rows {
		cells := make([]*fleetCell, len(keep))
		for k, i := range keep {
			cells[k] = r.Cells[i]
		}
		page.Rows[j].Cells = cells
	}
	page.Platforms, page.Classes = platforms, classes
}

// newestCell reads the newest entry of keys and the previous one of the
// same target class (within compareDepth).
func newestCell(ctx context.Context, store artifacts.Store, keys []string) (*fleetCell, error) {
	cur, prev, err := history.Newest(ctx, store, keys, compareDepth)
	if err != nil {
		return nil, err
	}
	good, err := lastGood(ctx, store, keys, cur, prev)
	if err != nil {
		return nil, err
	}
	changes := history.Compare(prev, cur)
	c := &fleetCell{Class: "ok", Entry: cur, Graphs: len(cur.Graphs), Regressions: history.Regressions(changes), LastGood: good}
	var detail []string
	for _, ch := range changes {
		detail = append(detail, fmt.Sprintf("graph %s %s: %s", ch.Graph, strings.ReplaceAll(ch.Kind, "_", " "), ch.Detail))
	}
	c.Detail = strings.Join(detail, "\n")
	var logSum float64
	n := 0
	for _, g := range cur.Graphs {
		if g.Status != history.GraphDone {
			c.Failed++
		}
		if g.Speedup != nil && g.Speedup.Ratio.Value > 0 && !math.IsInf(g.Speedup.Ratio.Value, 0) {
			logSum += math.Log(g.Speedup.Ratio.Value)
			n++
		}
		if g.Bench != nil && g.Bench.Throughput > c.Best {
			c.Best, c.BestGraph = g.Bench.Throughput, g.Name
		}
	}
	if n > 0 {
		c.Speedup = math.Exp(logSum / float64(n))
	}
	switch {
	case cur.Status != history.GraphDone || c.Failed > 0:
		c.Class = "failed"
	case c.Regressions > 0:
		c.Class = "regressed"
	}
	return c, nil
}

// lastGood is when the newest done entry of keys was submitted, looking
// back compareDepth entries (cur and prev are read already).
func lastGood(ctx context.Context, store artifacts.Store, keys []string, cur, prev *history.Entry) (time.Time, error) {
	for _, e := range []*history.Entry{cur, prev} {
		if e != nil && e.Status == history.GraphDone {
			return e.Created, nil
		}
	}
	for j := len(keys) - 2; j >= 0 && j >= len(keys)-compareDepth; j-- {
		e, err := history.Read(ctx, store, keys[j])
		if err != nil {
			return time.Time{}, err
		}
		if e.Status == history.GraphDone {
			return e.Created, nil
		}
	}
	return time.Time{}, nil
}
