package web

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"slices"
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

// platformHistory is one platform key's section: the target classes its
// runs were submitted for are its labels (each class's own copy of the
// history, filed under the class for deploy tooling, is not a second
// section).
type platformHistory struct {
	Platform string
	Classes  []string
	Charts   []template.HTML // one small chart per graph
	Rows     []historyRow    // newest first
}

type historyRow struct {
	Entry       *history.Entry
	Changes     []history.Change
	Regressions int
	Settings    string // what changed in the settings, "" nothing
	Version     string // what makes it a new version of the model, "" nothing
	// Previous is the run the entry is compared with ("" for the first
	// of its class): its row links the two side by side.
	Previous string
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	model := r.PathValue("model")
	if s.nameTooLong(w, r, "model", model) {
		return
	}
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
		if ph != nil {
			page.Platforms = append(page.Platforms, *ph)
		}
	}
	s.render(w, http.StatusOK, "model", "model "+model, page)
}

// platformHistory reads the newest entries of keys (one more than shown:
// the oldest shown is compared too) and charts each graph's throughput
// across them: failed runs as crosses, winner changes ringed, new
// versions and settings changes marked. A folder whose entries are of another platform key (a
// target class's copy) is no section of its own: nil.
func (s *Server) platformHistory(ctx context.Context, dir string, keys []string) (*platformHistory, error) {
	if len(keys) > historyLimit+1 {
		keys = keys[len(keys)-historyLimit-1:]
	}
	list, err := readEntries(ctx, s.cfg.Store, keys)
	if err != nil {
		return nil, err
	}
	if list[len(list)-1].Platform != dir {
		return nil, nil
	}
	ph := &platformHistory{Platform: dir}
	var xs []string
	dates := map[string]string{}
	var marks []svgchart.XMark
	series := map[string]*svgchart.Series{}
	var order []string
	for i, e := range list {
		if !slices.Contains(ph.Classes, e.Target) {
			ph.Classes = append(ph.Classes, e.Target)
		}
		prev := history.Previous(list, i)
		changes := history.Compare(prev, e)
		row := historyRow{Entry: e, Changes: changes, Regressions: history.Regressions(changes)}
		if prev != nil {
			row.Previous = prev.Run
		}
		for _, c := range changes {
			switch {
			case c.Kind == history.ChangeSettings && c.Graph == "":
				row.Settings = c.Detail
			case c.Kind == history.ChangeNewVersion && c.Graph == "":
				row.Version = c.Detail
			}
		}
		shown := i > 0 || len(list) <= historyLimit
		if !shown {
			continue
		}
		ph.Rows = append([]historyRow{row}, ph.Rows...)
		x := e.Run
		xs = append(xs, x)
		dates[x] = e.Created.UTC().Format("01-02 15:04")
		if row.Version != "" {
			// A release is marked as one (a deploy annotation), not left
			// to read as the regression its figures may look like.
			marks = append(marks, svgchart.XMark{X: x, Class: "version", Kind: "new version", Label: "new version: " + row.Version, Stroke: "#3567c8"})
		}
		if row.Settings != "" {
			marks = append(marks, svgchart.XMark{X: x, Class: "settings", Kind: "settings changed", Label: "settings changed: " + row.Settings})
		}
		for _, g := range e.Graphs {
			if series[g.Name] == nil {
				series[g.Name] = &svgchart.Series{Name: "graph " + g.Name}
				order = append(order, g.Name)
			}
			var pt svgchart.Point
			switch {
			case g.Bench != nil:
				pt = svgchart.Point{X: x, Y: g.Bench.Throughput, Title: fmt.Sprintf("graph %s, run %s (%s): %s at batch %d, %s samples/s",
					g.Name, e.Run, when(e.Created), g.Candidate, g.Bench.BatchSize, svgchart.Num(g.Bench.Throughput))}
			case g.Status == history.GraphFailed:
				pt = svgchart.Point{X: x, Title: fmt.Sprintf("graph %s, run %s (%s)", g.Name, e.Run, when(e.Created)), Failed: "failed: " + failureOf(g)}
			default:
				continue
			}
			for _, c := range changes {
				if c.Graph == g.Name && (c.Kind == history.ChangeWinner || c.Was == history.ChangeWinner) {
					pt.Mark = "winner changed: " + c.Detail
				}
			}
			series[g.Name].Points = append(series[g.Name].Points, pt)
		}
	}
	for _, name := range order {
		chart := svgchart.Lines{Title: "graph " + name + ": winner's throughput", XLabel: "run (submitted, UTC)", YLabel: "samples/s",
			XS: xs, XText: func(x string) string { return dates[x] }, Marks: marks, Small: true,
			MarkText: "winner changed", FailedText: "run failed",
			Series: []svgchart.Series{*series[name]}}
		ph.Charts = append(ph.Charts, chart.SVG())
	}
	return ph, nil
}

func failureOf(g history.Graph) string {
	if g.Failure == nil {
		return "no winner"
	}
	return string(g.Failure.Class)
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
