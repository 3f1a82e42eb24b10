package web

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/svgchart"
)

// historyLimit is how many entries per platform the model page shows.
const historyLimit = 60

type modelPage struct {
	Model     string
	Platforms []platformHistory
}

type platformHistory struct {
	Platform string
	Chart    template.HTML
	Rows     []historyRow // newest first
}

type historyRow struct {
	Entry       *history.Entry
	Changes     []history.Change
	Regressions int
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	model := r.PathValue("model")
	if err := artifacts.CheckPrefix("models/" + model + "/"); err != nil || strings.Contains(model, "/") {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("%q is not a model name", model))
		return
	}
	byModel, err := history.KeysByModel(r.Context(), s.cfg.Store, "models/"+model+"/")
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err)
		return
	}
	if len(byModel[model]) == 0 {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("model %s has no history in %s (a run's first entry is written when it finalizes)", model, s.cfg.Store))
		return
	}
	page := modelPage{Model: model}
	for _, p := range sortedKeys(byModel[model]) {
		ph, err := s.platformHistory(r.Context(), p, byModel[model][p])
		if err != nil {
			s.fail(w, r, http.StatusBadGateway, err)
			return
		}
		page.Platforms = append(page.Platforms, ph)
	}
	s.render(w, http.StatusOK, "model", "model "+model, page)
}

// platformHistory reads the newest entries of keys (one more than shown:
// the oldest shown is compared too) and charts each graph's throughput
// across them, ringing the entries whose winner changed.
func (s *Server) platformHistory(ctx context.Context, platform string, keys []string) (platformHistory, error) {
	if len(keys) > historyLimit+1 {
		keys = keys[len(keys)-historyLimit-1:]
	}
	list, err := readEntries(ctx, s.cfg.Store, keys)
	if err != nil {
		return platformHistory{}, err
	}
	ph := platformHistory{Platform: platform}
	chart := svgchart.Lines{Title: "winner's throughput per graph, run by run", XLabel: "run (submitted, UTC)", YLabel: "samples/s"}
	series := map[string]*svgchart.Series{}
	var order []string
	for i, e := range list {
		changes := history.Compare(history.Previous(list, i), e)
		if i > 0 || len(list) <= historyLimit {
			ph.Rows = append([]historyRow{{Entry: e, Changes: changes, Regressions: history.Regressions(changes)}}, ph.Rows...)
		}
		x := e.Created.UTC().Format("01-02 15:04:05.000")
		chart.XS = append(chart.XS, x)
		for _, g := range e.Graphs {
			if g.Bench == nil {
				continue
			}
			if series[g.Name] == nil {
				series[g.Name] = &svgchart.Series{Name: "graph " + g.Name}
				order = append(order, g.Name)
			}
			pt := svgchart.Point{X: x, Y: g.Bench.Throughput, Title: fmt.Sprintf("graph %s, run %s: %s at batch %d, %s samples/s",
				g.Name, e.Run, g.Candidate, g.Bench.BatchSize, svgchart.Num(g.Bench.Throughput))}
			for _, c := range changes {
				if c.Graph == g.Name && c.Kind == history.ChangeWinner {
					pt.Mark = "winner changed: " + c.Detail
				}
			}
			series[g.Name].Points = append(series[g.Name].Points, pt)
		}
	}
	for _, name := range order {
		chart.Series = append(chart.Series, *series[name])
	}
	ph.Chart = chart.SVG()
	return ph, nil
}

// readEntries reads history entries in parallel, in the order of keys.
func readEntries(ctx context.Context, store artifacts.Store, keys []string) ([]*history.Entry, error) {
	out := make([]*history.Entry, len(keys))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, k := range keys {
		g.Go(func() error {
			e, err := history.Read(gctx, store, k)
			out[i] = e
			return err
		})
	}
	return out, g.Wait()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
