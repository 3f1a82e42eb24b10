package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/redis/go-redis/v9"

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

// waitingFor is "waiting for a worker of class X (none live; last seen …)"
// when no worker of class is live, "" when one is or the registry cannot
// be read (status still shows the run).
func waitingFor(ctx context.Context, rdb redis.UniversalClient, class string) string {
	reg, err := targetclass.Load(ctx, rdb, declaredClasses())
	if err != nil {
		return ""
	}
	v, _ := reg.Judge(class) // a run already submitted: refused or not, it waits
	return v.Waiting()
}
