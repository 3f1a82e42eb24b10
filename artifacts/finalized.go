package artifacts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tunefleet/tunefleet/state"
)

// FinalizedRun is a run of a model that finalized successfully, as its
// runs/<run>/state.json says.
type FinalizedRun struct {
	Run         string
	Platform    string
	SubmittedAt time.Time
	FinalizedAt time.Time
}

// maxStatesScanned bounds how many state.json files FinalizedRuns reads: it
// serves error messages, which must not turn into a crawl of a big bucket.
const maxStatesScanned = 256

// FinalizedRuns finds the runs of model on platform (a platform key or a
// target class) whose state.json says done, newest submission first: what
// `fetch --run` can take when latest.json is gone or names a state that is
// gone. Run ids start with the model's name ("<model>-<digest>"), so only
// that part of runs/ is listed; at most maxStatesScanned states are read.
func FinalizedRuns(ctx context.Context, s Store, model, platform string) ([]FinalizedRun, error) {
	keys, err := s.List(ctx, "runs/"+model+"-")
	if err != nil {
		return nil, fmt.Errorf("list runs of %s: %w", model, err)
	}
	var states []string
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, "runs/")
		if run, ok2 := strings.CutSuffix(rest, "/state.json"); ok && ok2 && !strings.Contains(run, "/") {
			states = append(states, k)
		}
	}
	if len(states) > maxStatesScanned {
		states = states[len(states)-maxStatesScanned:]
	}
	var (
		mu   sync.Mutex
		out  []FinalizedRun
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 8) // latency, not bandwidth: small files
	)
	for _, key := range states {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var st state.State
			if err := GetJSON(ctx, s, key, &st); err != nil {
				if !errors.Is(err, ErrNotExist) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				return
			}
			if st.Status != "done" || st.Model != model || (st.Platform != platform && st.Target != platform) {
				return
			}
			mu.Lock()
			out = append(out, FinalizedRun{Run: st.Run, Platform: st.Platform, SubmittedAt: st.Provenance.SubmittedAt, FinalizedAt: st.Provenance.FinalizedAt})
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...) // say why nothing was found, not "nothing"
	}
	slices.SortFunc(out, func(a, b FinalizedRun) int {
		if c := b.SubmittedAt.Compare(a.SubmittedAt); c != 0 {
			return c
		}
		if c := b.FinalizedAt.Compare(a.FinalizedAt); c != 0 {
			return c
		}
		return strings.Compare(b.Run, a.Run)
	})
	return out, nil
}

// latestMissing explains a latest.json that does not exist: nothing ever
// finalized successfully, or (runs are there) latest.json was deleted, in
// which case the newest of them are named with `--run`.
func latestMissing(ctx context.Context, s Store, model, platform string) error {
	key := LatestKey(model, platform)
	runs, err := FinalizedRuns(ctx, s, model, platform)
	if err != nil || len(runs) == 0 {
		msg := fmt.Sprintf("no good state of model %q on platform %q in %s (nothing finalized successfully yet)", model, platform, s)
		// A model with runs (none good) is known: the hint from models/
		// (which only good runs write) would call it unknown.
		if hint := ModelHint(ctx, s, model, platform); hint != "" && !hasRuns(ctx, s, model) {
			msg = fmt.Sprintf("no good state of model %q on platform %q in %s: %s", model, platform, s, hint)
		}
		if err != nil {
			msg = fmt.Sprintf("no good state of model %q on platform %q in %s: %s is missing, and its runs could not be listed (%v)", model, platform, s, key, err)
		}
		return fmt.Errorf("%s: %w", msg, ErrNotExist)
	}
	return fmt.Errorf("%s is missing from %s, but runs of model %q on %q finalized successfully: %s; fetch one with --run, e.g. --run %s: %w",
		key, s, model, platform, describeRuns(runs, 3), runs[0].Run, ErrNotExist)
}

// hasRuns reports whether the store holds any run of model: a key under
// runs/<model>-<12 hex digits>/ (run ids are jobs.RunID's), so that model
// "m" does not count the runs of "m-other".
func hasRuns(ctx context.Context, s Store, model string) bool {
	keys, err := s.List(ctx, "runs/"+model+"-")
	if err != nil {
		return false
	}
	for _, k := range keys {
		id, _, _ := strings.Cut(strings.TrimPrefix(k, "runs/"+model+"-"), "/")
		if len(id) == 12 && strings.Trim(id, "0123456789abcdef") == "" {
			return true
		}
	}
	return false
}

// describeRuns lists the first n runs with their submission times.
func describeRuns(runs []FinalizedRun, n int) string {
	var parts []string
	for _, r := range runs[:min(n, len(runs))] {
		parts = append(parts, fmt.Sprintf("%s (submitted %s)", r.Run, r.SubmittedAt.UTC().Format(time.RFC3339)))
	}
	if len(runs) > n {
		parts = append(parts, fmt.Sprintf("and %d older", len(runs)-n))
	}
	return strings.Join(parts, ", ")
}
