package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/targetclass"
)

// declaredClasses are the classes the producer's environment declares
// (TUNEFLEET_CLASSES, the deploy's ConfigMap tunefleet-classes) plus
// extra.
func declaredClasses(extra ...string) []string {
	out := targetclass.FromEnv(os.Getenv)
	for _, c := range extra {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// checkTargetClass applies the target class rule to class before anything
// is submitted: refused (exit 2) when neither declared nor ever served;
// accepted with a "waiting for a worker" line on errOut when no worker of
// it is live.
func checkTargetClass(ctx context.Context, errOut io.Writer, rdb redis.UniversalClient, class string, declared []string) error {
	reg, err := targetclass.Load(ctx, rdb, declaredClasses(declared...))
	if err != nil {
		return err
	}
	v, err := reg.Judge(class)
	var refused *targetclass.RefusedError
	if errors.As(err, &refused) {
		return usageErr(err)
	}
	if w := v.Waiting(); w != "" {
		fmt.Fprintf(errOut, "%s: the tasks queue until one starts\n", w)
	}
	return nil
}

// waitingFor is what a run on class waits for when no worker of it is
// live ("waiting for a worker of class X (none live; last seen …)"); nil
// when one is, or when the registry cannot be read (status still shows
// the run).
func waitingFor(ctx context.Context, rdb redis.UniversalClient, class string) *targetclass.Wait {
	w, err := targetclass.WaitOf(ctx, rdb, class, declaredClasses())
	if err != nil {
		return nil
	}
	return w
}

// waitingLines are the waiting lines of the classes of the runs that are
// not final, one per class, in the order first met.
func waitingLines(ctx context.Context, rdb redis.UniversalClient, list []runstate.RunStatus) []string {
	var lines []string
	seen := map[string]bool{}
	for _, r := range list {
		if r.Final() || seen[r.Target] {
			continue
		}
		seen[r.Target] = true
		if w := waitingFor(ctx, rdb, r.Target); w != nil {
			lines = append(lines, w.Message)
		}
	}
	return lines
}

// runWithWait is status -o json of one run: the run, and what it waits
// for while no worker of its class is live.
type runWithWait struct {
	runstate.RunStatus
	WaitingForClass *targetclass.Wait `json:"waiting_for_class,omitempty"`
}
