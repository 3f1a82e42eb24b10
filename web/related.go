package web

import (
	"context"
	"errors"
	"net/url"

	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/runstate"
)

// Compare is one click away from every page that shows a run: the run
// page links the comparison with the previous run of its model on its
// platform, its nightly and, when the run regressed, the nightly's entry
// for it; the model page links each run's comparison with the one before
// it; the nightly page links each entry's (package report draws it).

// related is what a run page links beyond the run itself.
type related struct {
	// Nightly is the nightly that submitted the run ("" by hand).
	Nightly string
	// Previous is the run its history entry is compared with (the one
	// before it of the same target class on its platform), or for a run
	// not yet in the history the newest one there; Compare the URL of the
	// two side by side.
	Previous, Compare string
	// Regressions counts the run's regressions against Previous;
	// RegressionURL is the nightly's entry that reports them.
	Regressions   int
	RegressionURL string
}

// compareURL is /compare of run a (before) with run b.
func compareURL(a, b string) string {
	return "/compare?" + url.Values{"a": {a}, "b": {b}}.Encode()
}

// relatedOf finds what the run page of st links beyond it. A store that
// does not answer only leaves the links out: the page still shows the run.
func (s *Server) relatedOf(ctx context.Context, st runstate.RunStatus, spec *jobs.RunSpec) related {
	var rel related
	rel.Nightly = st.Nightly
	if rel.Nightly == "" && spec != nil {
		rel.Nightly = spec.Nightly
	}
	// A run's history is filed under its platform key (and a copy under
	// its class); a run not bound to one yet has only its class's.
	platform := st.Platform
	if platform == "" {
		platform = st.Target
	}
	if st.Model == "" || platform == "" {
		return rel
	}
	// The head of the history names its newest entries; only a final run
	// older than those is looked for in the whole history's listing.
	cur, prev, err := history.FindRecent(ctx, s.cfg.Store, st.Model, platform, st.Run)
	if errors.Is(err, history.ErrNotRecent) && st.Final() {
		cur, prev, err = history.Find(ctx, s.cfg.Store, st.Model, platform, st.Run)
	}
	switch {
	case err == nil:
		if prev != nil {
			rel.Previous = prev.Run
			rel.Regressions = history.Regressions(history.Compare(prev, cur))
		}
	default:
		// Not in the history yet (running, or it never finalized): the
		// newest run there of its class is the one it will be compared
		// with.
		keys, err := history.Recent(ctx, s.cfg.Store, st.Model, platform, history.HeadDepth)
		if err != nil || len(keys) == 0 {
			return rel
		}
		newest, before, err := history.Newest(ctx, s.cfg.Store, keys, 0)
		switch {
		case err != nil:
		case newest.Target == st.Target && newest.Run != st.Run:
			rel.Previous = newest.Run
		case before != nil && before.Run != st.Run:
			rel.Previous = before.Run
		}
	}
	if rel.Previous != "" {
		rel.Compare = compareURL(rel.Previous, st.Run)
	}
	if rel.Regressions > 0 && rel.Nightly != "" {
		rel.RegressionURL = report.Links{Served: true}.Nightly(rel.Nightly) + "#" + report.EntryAnchor(st.Model, st.Target)
	}
	return rel
}
