package faults_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
)

// want is how a scenario's run must end.
type want struct {
	status string // runstate.RunDone or runstate.RunFailed
	model  string
	// latestBefore is the run latest.json named before this one ("" for
	// none): a failed run must leave it so.
	latestBefore string
}

// checkRun asserts what every scenario asserts about its run once the
// fault is over (see the package doc) and returns the run as `producer
// status` shows it.
func checkRun(t *testing.T, sc *scenario, s *stack.Stack, run string, w want) runstate.RunStatus {
	t.Helper()
	ctx := context.Background()
	st, r := s.Status(run)
	if r.Code != 0 {
		t.Fatalf("producer status %s: %v", run, r)
	}
	if st.Status != w.status {
		t.Errorf("producer status %s: %s (%+v), want %s", run, st.Status, st.Graphs, w.status)
	}
	rec, err := s.Runs().Get(ctx, run)
	if err != nil {
		t.Fatalf("run %s in Redis: %v", run, err)
	}
	if rec.Finalizations != 1 {
		t.Errorf("run %s finalized %d times, want exactly once", run, rec.Finalizations)
	}
	store := s.Store()
	latest := latestRun(t, store, w.model, s.Queue)
	switch {
	case w.status == runstate.RunDone && latest != run:
		t.Errorf("latest.json names run %q, want the done run %s", latest, run)
	case w.status != runstate.RunDone && latest != w.latestBefore:
		t.Errorf("latest.json names run %q after a %s run, want it unchanged (%q)", latest, w.status, w.latestBefore)
	}
	bad, err := stack.VerifyBlobs(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("corrupt blob %s", b)
	}
	orphans, err := stack.Orphans(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if len(orphans) > 0 {
		t.Errorf("%d orphan blob(s), named by no manifest: %v", len(orphans), orphans)
	}
	sc.assert("status "+w.status, "finalized once", "latest.json", "blobs re-hash", "no orphans")
	return st
}

// latestRun is the run latest.json names for model on platform, "" when
// there is none.
func latestRun(t *testing.T, store artifacts.Store, model, platform string) string {
	t.Helper()
	var l state.Latest
	err := artifacts.GetJSON(context.Background(), store, artifacts.LatestKey(model, platform), &l)
	if errors.Is(err, artifacts.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatalf("latest.json of %s on %s: %v", model, platform, err)
	}
	return l.Run
}

// wantLine asserts that what a user sees (a worker's log, a command's
// stderr) says something.
func wantLine(t *testing.T, sc *scenario, where, text, substr string) {
	t.Helper()
	if !strings.Contains(text, substr) {
		t.Errorf("%s does not say %q; it says:\n%s", where, substr, text)
	}
	sc.assert("message: " + where)
}

// wantStatusLine asserts that `producer status RUN` (text) heads its table
// with the run's final status.
func wantStatusLine(t *testing.T, sc *scenario, s *stack.Stack, run, status string) {
	t.Helper()
	r := s.Producer("status", run)
	wantMatch(t, sc, "producer status", r.Stdout, `(?m)^run `+regexp.QuoteMeta(run)+` \(model .*\): `+status+`$`)
}
