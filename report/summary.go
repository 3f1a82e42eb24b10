package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/state"

	"github.com/tunefleet/tunefleet/internal/human"
	"github.com/tunefleet/tunefleet/internal/parallel"
)

// SummaryFormat is the version of summary.json.
const SummaryFormat = "tunefleet.nightly-summary/v1"

// Entry statuses in a summary.
const (
	StatusDone         = "done"
	StatusFailed       = "failed"        // the run finalized as failed
	StatusNotSubmitted = "not_submitted" // the plan says it could not be submitted
	StatusPending      = "pending"       // the run has no history entry yet: not final
	StatusCancelled    = "cancelled"     // the run was cancelled (cancelled runs have no history entry)
)

// Summary is nightly/<id>/summary.json.
type Summary struct {
	Format        string    `json:"format"`
	Nightly       string    `json:"nightly"`
	FleetDigest   string    `json:"fleet_digest"`
	PlanCreatedAt time.Time `json:"plan_created_at"`
	GeneratedAt   time.Time `json:"generated_at"`
	Totals        Totals    `json:"totals"`
	Entries       []Entry   `json:"entries"`
	// Finish is the night's expected finish (the plan's estimate) next
	// to its actual one; absent for a plan without an estimate.
	Finish *Finish `json:"finish,omitempty"`
	// Webhook is what the webhook's delivery came to
	// (nightly/<id>/notified.json); absent when none was tried.
	Webhook *Marker `json:"webhook_delivery,omitempty"`
}

// Finish compares the plan's expected finish with the actual one.
type Finish struct {
	// EnqueuedAt is when the plan's tasks were enqueued: the estimate's
	// start, from which both spans below are measured.
	EnqueuedAt time.Time `json:"enqueued_at"`
	// Expected is absent when a class had no worker to expect a finish of.
	Expected *time.Time `json:"expected,omitempty"`
	// Guess says Expected is a guess (state.PlanEstimate.Guess: a first
	// night, with no history to estimate from); it gets no ErrorPercent,
	// since an error of a guess says nothing of the estimate.
	Guess bool `json:"guess,omitempty"`
	// Actual is the last finalize of the night's runs; absent while one
	// is pending.
	Actual *time.Time `json:"actual,omitempty"`
	// ErrorPercent is (expected span − actual span) ÷ actual span × 100:
	// negative when the night took longer than expected. Absent for a
	// guess.
	ErrorPercent *float64 `json:"error_percent,omitempty"`
}

// NewFinish is est's finish next to actual (nil while a run is pending).
func NewFinish(est *state.PlanEstimate, actual *time.Time) *Finish {
	f := &Finish{EnqueuedAt: est.EnqueuedAt, Expected: est.ExpectedFinish, Guess: est.Guess, Actual: actual}
	if f.Expected != nil && actual != nil && actual.After(est.EnqueuedAt) && !f.Guess {
		span := actual.Sub(est.EnqueuedAt).Seconds()
		pct := 100 * (f.Expected.Sub(est.EnqueuedAt).Seconds() - span) / span
		f.ErrorPercent = &pct
	}
	return f
}

// Line is the finish in one line of text ("" without an estimate). A
// guess says so, and shows both spans instead of an error percentage.
func (f *Finish) Line() string {
	if f == nil {
		return ""
	}
	at := func(t *time.Time) string {
		if t == nil {
			return "unknown"
		}
		return human.Clock(*t)
	}
	expected := "expected " + at(f.Expected)
	if f.Guess {
		expected = "guessed " + at(f.Expected) + " (a guess: no history yet, estimated from the bundles)"
	}
	line := fmt.Sprintf("finish: %s, actual %s", expected, at(f.Actual))
	if f.Actual == nil {
		line = fmt.Sprintf("finish: %s, actual not yet (a run is pending)", expected)
	}
	switch {
	case f.ErrorPercent != nil:
		line += fmt.Sprintf(" (estimate %+.0f%% of the %s actual span)", *f.ErrorPercent, f.Actual.Sub(f.EnqueuedAt).Round(time.Second))
	case f.Guess && f.Expected != nil && f.Actual != nil:
		line += fmt.Sprintf(" (guessed span %s, actual span %s)", human.Seconds(f.Expected.Sub(f.EnqueuedAt).Seconds()), human.Seconds(f.Actual.Sub(f.EnqueuedAt).Seconds()))
	}
	return line
}

// Totals add up a summary's entries.
type Totals struct {
	Entries       int `json:"entries"`
	Done          int `json:"done"`
	Failed        int `json:"failed"` // failed or cancelled runs and entries not submitted
	Pending       int `json:"pending"`
	Unchanged     int `json:"unchanged"`
	Regressions   int `json:"regressions"`
	Faster        int `json:"faster"`
	WinnerChanges int `json:"winner_changes"`
	// SettingsChanged counts the entries whose settings differ from the
	// previous entry's (their moves are no regressions).
	SettingsChanged int `json:"settings_changed"`
	// NewVersions counts the entries whose bundle changed (a new version
	// of the model: its graphs' moves are not regressions); Remeasured
	// the graphs of the same version measured again.
	NewVersions  int `json:"new_versions,omitempty"`
	Remeasured   int `json:"remeasured,omitempty"`
	NewlyFailing int `json:"newly_failing"`
	Recovered    int `json:"recovered"`
	// Device seconds spent tuning tonight, and saved by reusing results
	// (what those graphs had cost when they were tuned).
	GPUSecondsSpent float64 `json:"gpu_seconds_spent"`
	GPUSecondsSaved float64 `json:"gpu_seconds_saved"`
	CPUSecondsSpent float64 `json:"cpu_seconds_spent"`
	CPUSecondsSaved float64 `json:"cpu_seconds_saved"`
}

// Entry is one model × target of the nightly.
type Entry struct {
	Model        string   `json:"model"`
	Target       string   `json:"target"`
	Platform     string   `json:"platform,omitempty"`
	Run          string   `json:"run,omitempty"`
	Outcome      string   `json:"outcome"` // the plan's: submitted | unchanged | failed
	Status       string   `json:"status"`  // done | failed | cancelled | not_submitted | pending
	Error        string   `json:"error,omitempty"`
	Reasons      []string `json:"reasons,omitempty"`
	PreviousRun  string   `json:"previous_run,omitempty"`
	Device       string   `json:"device,omitempty"`
	SpentSeconds float64  `json:"spent_seconds"`
	SavedSeconds float64  `json:"saved_seconds"`
	Regressions  int      `json:"regressions"`
	// SettingsChanged says what differs from the previous entry's settings
	// (candidates, strategy, tolerances, bench settings, toolchain); "" none.
	SettingsChanged string `json:"settings_changed,omitempty"`
	// NewVersion says what makes the run a new version of the model (its
	// bundle digest, the graphs whose files or shapes changed); "" none.
	NewVersion string `json:"new_version,omitempty"`
	// Carried says the plan carried an earlier run forward (its work was
	// done, state.PlanEntry.Carried): Run is that run, nothing ran
	// tonight, nothing is compared, and all its graphs' device seconds
	// count as saved. CarriedFrom is the nightly that submitted the run
	// ("" for one submitted by hand).
	Carried     bool             `json:"carried,omitempty"`
	CarriedFrom string           `json:"carried_from,omitempty"`
	Graphs      []GraphRow       `json:"graphs,omitempty"`
	Changes     []history.Change `json:"changes,omitempty"`
	finalized   time.Time        // the run's finalize (the night's actual finish is the last)
}

// GraphRow is one graph tonight next to the entry before it.
type GraphRow struct {
	Name              string         `json:"name"`
	Status            string         `json:"status"`
	Candidate         string         `json:"candidate,omitempty"`
	Reused            bool           `json:"reused"`
	Bench             *history.Bench `json:"bench,omitempty"`
	PreviousStatus    string         `json:"previous_status,omitempty"`
	PreviousCandidate string         `json:"previous_candidate,omitempty"`
	PreviousBench     *history.Bench `json:"previous_bench,omitempty"`
}

// HasNews says whether the summary is worth a webhook: a regression, a
// failure or a new version of a model (announced as one, not paged as a
// regression).
func (s *Summary) HasNews() bool {
	return s.Totals.Regressions > 0 || s.Totals.Failed > 0 || s.Totals.NewVersions > 0
}

// summarizeParallel is how many entries Summarize reads at once.
const summarizeParallel = 16

// Summarize builds a nightly's summary from its plan and the runs'
// history entries; it writes nothing. Each run is compared with the entry
// before it in the model's history on the platform the run ran on.
func Summarize(ctx context.Context, store artifacts.Store, plan *state.Plan) (*Summary, error) {
	s := &Summary{Format: SummaryFormat, Nightly: plan.Nightly, FleetDigest: plan.FleetDigest, PlanCreatedAt: plan.CreatedAt,
		GeneratedAt: time.Now().UTC(), Entries: []Entry{}}
	// Entries are read several at once (each is a few small reads, one
	// after the other: a night of a thousand models on S3 waited for
	// thousands of round trips in a row) and added in the plan's order.
	entries := make([]Entry, len(plan.Entries))
	if err := parallel.ForEach(ctx, len(plan.Entries), summarizeParallel, func(ctx context.Context, i int) error {
		e, err := summarizeEntry(ctx, store, plan.Entries[i])
		entries[i] = e
		return err
	}); err != nil {
		return nil, err
	}
	var last time.Time
	for _, e := range entries {
		if e.finalized.After(last) {
			last = e.finalized
		}
		s.add(e)
	}
	if est := plan.Estimate; est != nil {
		var actual *time.Time
		if s.Totals.Pending == 0 {
			// An unchanged night finishes when it is enqueued.
			a := est.EnqueuedAt.UTC()
			if last.After(a) {
				a = last.UTC()
			}
			actual = &a
		}
		s.Finish = NewFinish(est, actual)
	}
	// The morning's reading order: what failed, then what regressed, then
	// new versions, then what changed its settings, then the rest, each in
	// the plan's order.
	slices.SortStableFunc(s.Entries, func(a, b Entry) int { return a.rank() - b.rank() })
	m, err := ReadMarker(ctx, store, plan.Nightly)
	if err != nil {
		return nil, err
	}
	s.Webhook = m
	return s, nil
}

// bad says the entry failed (or was never submitted or cancelled).
func (e Entry) bad() bool {
	return e.Status == StatusFailed || e.Status == StatusNotSubmitted || e.Status == StatusCancelled
}

// quiet says the entry has nothing to say beyond its status: done, every
// graph done and measured stable, no change, no regression, no reason,
// no new version, no settings changed. The nightly page and report.html
// give it one line instead of its graphs' chart and table (a night of
// 10,000 unchanged graphs was a page of megabytes that said nothing);
// summary.json keeps its graphs, and its run's page lists them.
func (e Entry) quiet() bool {
	if e.Status != StatusDone || e.Error != "" || len(e.Reasons) > 0 || e.Regressions > 0 || len(e.Changes) > 0 ||
		e.NewVersion != "" || e.SettingsChanged != "" {
		return false
	}
	for _, g := range e.Graphs {
		if g.Status != StatusDone || (g.Bench != nil && !g.Bench.Stable) || (g.PreviousBench != nil && !g.PreviousBench.Stable) {
			return false
		}
	}
	return true
}

// shownGraphs is how many graphs' rows Body shows: those of the entries
// that are not quiet.
func (s *Summary) shownGraphs() int {
	n := 0
	for _, e := range s.Entries {
		if !e.quiet() {
			n += len(e.Graphs)
		}
	}
	return n
}

func (e Entry) rank() int {
	switch {
	case e.bad():
		return 0
	case e.Regressions > 0:
		return 1
	case e.NewVersion != "":
		return 2
	case e.SettingsChanged != "":
		return 3
	}
	return 4
}

func summarizeEntry(ctx context.Context, store artifacts.Store, pe state.PlanEntry) (Entry, error) {
	e := Entry{Model: pe.Model, Target: pe.Target, Run: pe.Run, Outcome: pe.Outcome, Error: pe.Error}
	if pe.Outcome == state.OutcomeFailed || pe.Run == "" {
		e.Status = StatusNotSubmitted
		if e.Error == "" {
			e.Error = "the plan names no run"
		}
		return e, nil
	}
	// The class's history finds the run without knowing its platform;
	// the platform's history is what it is compared in. The heads of both
	// name their newest entries: a night's page reads a few documents per
	// entry, not the listing of each model's whole history. A run they do
	// not name is not final yet (no state.json, or a cancelled one), or of
	// an older night, which only the listing finds.
	cur, err := history.FindRecentEntry(ctx, store, pe.Model, pe.Target, pe.Run)
	if errors.Is(err, history.ErrNoEntry) || errors.Is(err, history.ErrNotRecent) {
		// Not final yet, or cancelled: a cancelled run has a state.json
		// but no history entry, and would otherwise hold the webhook back
		// (pending) forever.
		var st struct {
			Status  string   `json:"status"`
			Reasons []string `json:"reasons"`
		}
		notRecent := errors.Is(err, history.ErrNotRecent)
		switch serr := artifacts.GetJSON(ctx, store, artifacts.StateKey(pe.Run), &st); {
		case serr == nil && st.Status == StatusCancelled:
			e.Status, e.Reasons = StatusCancelled, st.Reasons
			return e, nil
		case serr == nil && notRecent:
			// Final, and older than the newest entries: the listing.
		case errors.Is(serr, artifacts.ErrNotExist) && notRecent:
			// Not final yet while its run.json is there; a run removed
			// by producer gc past its retention keeps its history entry,
			// which only the listing finds.
			if _, rerr := store.Stat(ctx, artifacts.RunKey(pe.Run)); rerr == nil {
				e.Status = StatusPending
				return e, nil
			} else if !errors.Is(rerr, artifacts.ErrNotExist) {
				return e, rerr
			}
		case serr == nil || errors.Is(serr, artifacts.ErrNotExist):
			e.Status = StatusPending
			return e, nil
		default:
			return e, serr
		}
		cur, _, err = history.Find(ctx, store, pe.Model, pe.Target, pe.Run)
		if errors.Is(err, history.ErrNoEntry) {
			e.Status = StatusPending
			return e, nil
		}
	}
	if err != nil {
		return e, err
	}
	if pe.Carried {
		return carriedEntry(e, cur), nil
	}
	platform := cur.Platform
	cur, prev, err := history.FindRecent(ctx, store, pe.Model, platform, pe.Run)
	if errors.Is(err, history.ErrNotRecent) {
		cur, prev, err = history.Find(ctx, store, pe.Model, platform, pe.Run)
	}
	if err != nil {
		return e, err
	}
	e.Platform, e.Status, e.Reasons, e.Device = cur.Platform, cur.Status, cur.Reasons, cur.Device
	if pe.Outcome == state.OutcomeSubmitted {
		e.finalized = cur.FinalizedAt
	}
	e.SpentSeconds, e.SavedSeconds = cur.SpentSeconds, cur.SavedSeconds
	before := map[string]history.Graph{}
	if prev != nil {
		e.PreviousRun = prev.Run
		for _, g := range prev.Graphs {
			before[g.Name] = g
		}
	}
	for _, g := range cur.Graphs {
		row := GraphRow{Name: g.Name, Status: g.Status, Candidate: g.Candidate, Reused: g.Reused, Bench: g.Bench}
		if p, ok := before[g.Name]; ok {
			row.PreviousStatus, row.PreviousCandidate, row.PreviousBench = p.Status, p.Candidate, p.Bench
		}
		e.Graphs = append(e.Graphs, row)
	}
	e.Changes = history.Compare(prev, cur)
	e.Regressions = history.Regressions(e.Changes)
	for _, c := range e.Changes {
		switch {
		case c.Kind == history.ChangeSettings && c.Graph == "":
			e.SettingsChanged = c.Detail
		case c.Kind == history.ChangeNewVersion && c.Graph == "":
			e.NewVersion = c.Detail
		}
	}
	return e, nil
}

// carriedEntry is a carried plan entry as tonight saw it, from the carried
// run's history entry cur: done as it was, every graph reused, nothing
// spent and every graph's cost saved, and no change: the run's changes
// were that night's news, reported then, not tonight's.
func carriedEntry(e Entry, cur *history.Entry) Entry {
	e.Carried, e.CarriedFrom = true, cur.Nightly
	e.Platform, e.Status, e.Reasons, e.Device = cur.Platform, cur.Status, cur.Reasons, cur.Device
	e.SpentSeconds, e.SavedSeconds = 0, cur.SpentSeconds+cur.SavedSeconds
	for _, g := range cur.Graphs {
		e.Graphs = append(e.Graphs, GraphRow{Name: g.Name, Status: g.Status, Candidate: g.Candidate, Reused: true, Bench: g.Bench})
	}
	return e
}

func (s *Summary) add(e Entry) {
	t := &s.Totals
	t.Entries++
	switch e.Status {
	case StatusDone:
		t.Done++
	case StatusFailed, StatusNotSubmitted, StatusCancelled:
		t.Failed++
	case StatusPending:
		t.Pending++
	}
	if e.Outcome == state.OutcomeUnchanged {
		t.Unchanged++
	}
	t.Regressions += e.Regressions
	if e.SettingsChanged != "" {
		t.SettingsChanged++
	}
	if e.NewVersion != "" {
		t.NewVersions++
	}
	for _, c := range e.Changes {
		switch c.Kind {
		case history.ChangeFaster:
			t.Faster++
		case history.ChangeWinner:
			t.WinnerChanges++
		case history.ChangeNewlyFailing:
			t.NewlyFailing++
		case history.ChangeRecovered:
			t.Recovered++
		case history.ChangeRemeasured:
			t.Remeasured++
		}
	}
	if e.Device == "cpu" {
		t.CPUSecondsSpent += e.SpentSeconds
		t.CPUSecondsSaved += e.SavedSeconds
	} else {
		t.GPUSecondsSpent += e.SpentSeconds
		t.GPUSecondsSaved += e.SavedSeconds
	}
	s.Entries = append(s.Entries, e)
}

// Nightly builds a nightly's summary and writes summary.json and
// report.html next to its plan. Both are derived: a later call (once more
// runs are final) rewrites them.
func Nightly(ctx context.Context, store artifacts.Store, plan *state.Plan, links Links) (*Summary, error) {
	s, err := Summarize(ctx, store, plan)
	if err != nil {
		return nil, err
	}
	if err := write(ctx, store, s, links); err != nil {
		return nil, err
	}
	return s, nil
}

// write writes a summary's report.html and summary.json.
func write(ctx context.Context, store artifacts.Store, s *Summary, links Links) error {
	var page bytes.Buffer
	if err := RenderHTML(&page, s, links); err != nil {
		return fmt.Errorf("render the report of nightly %s: %w", s.Nightly, err)
	}
	// The page first: summary.json is what a reader polls for.
	if err := store.Put(ctx, ReportKey(s.Nightly), bytes.NewReader(page.Bytes()), int64(page.Len())); err != nil {
		return fmt.Errorf("write %s: %w", ReportKey(s.Nightly), err)
	}
	if err := artifacts.PutJSON(ctx, store, SummaryKey(s.Nightly), s); err != nil {
		return fmt.Errorf("write %s: %w", SummaryKey(s.Nightly), err)
	}
	return nil
}
