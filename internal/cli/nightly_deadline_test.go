package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/hooktest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
)

// TestNightlyDeadlineWarning: a nightly whose estimate does not fit
// before --deadline warns on stderr and posts the warning once to the
// --notify webhook (a real HTTP receiver), naming the class short of
// workers and how many would fit; with enough workers assumed it says
// nothing and posts nothing. A bad --workers or --deadline is exit 2.
func TestNightlyDeadlineWarning(t *testing.T) {
	dir := mlpBundle(t)
	url := testsvc.OwnRedis(t, testsvc.RedisOptions{}).URL
	opts, _ := redis.ParseURL(url)
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	// Both classes were served once; no worker is live (scale-from-zero).
	if err := runstate.RegisterPlatforms(context.Background(), rdb, []string{"cpu", "cpu.b"}, []string{"cpu-test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	hookURL, bodies := hooktest.Receiver(t)
	f := filepath.Join(t.TempDir(), "fleet.yaml")
	os.WriteFile(f, []byte(fmt.Sprintf("format: tunefleet.fleet/v1\ndefaults:\n  targets: [cpu, cpu.b]\n  candidates: [ort:cpu:basic]\nmodels:\n  - model: mlp\n    bundle: %s\n", dir)), 0o644)
	// Each graph is expected to take 20 minutes (no history); the
	// deadline is 30 minutes away.
	deadline := time.Now().Add(30 * time.Minute).Format(time.RFC3339)
	for _, tc := range []struct {
		name, date string
		workers    []string
		warn       []string // in the warning; nil: no warning
	}{
		{"a class with no worker", "2026-12-01", []string{"--workers", "cpu=1"}, []string{"will not finish by its deadline", "cpu.b: no worker, 1 would fit"}},
		{"enough workers assumed", "2026-12-02", []string{"--workers", "cpu=1,cpu.b=2"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(bodies())
			args := append([]string{"nightly", "--fleet", f, "--redis", url, "--store", "file://" + t.TempDir(), "--date", tc.date,
				"--estimate-default", "20m", "--deadline", deadline, "--notify", hookURL}, tc.workers...)
			out := producer(t, args...)
			out.wantCode(t, cli.ExitOK)
			if !strings.Contains(out.stderr, "expected finish") {
				t.Errorf("no estimate line:\n%s", out)
			}
			got := bodies()[before:]
			if tc.warn == nil {
				if strings.Contains(out.stderr, "warning:") || len(got) != 0 {
					t.Errorf("warned with enough workers:\n%s\nwebhook %q", out, got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("webhook bodies %q: want one\n%s", got, out)
			}
			for _, w := range tc.warn {
				if !strings.Contains(out.stderr, "warning: ") || !strings.Contains(out.stderr, w) || !strings.Contains(got[0], w) {
					t.Errorf("want %q on stderr and in the webhook body %q\n%s", w, got[0], out)
				}
			}
			if strings.Contains(got[0], "cpu:") {
				t.Errorf("the webhook names cpu, which has the worker it needs: %q", got[0])
			}
			// The same night again: its plan, no second warning.
			producer(t, args...).wantCode(t, cli.ExitOK)
			if n := len(bodies()) - before; n != 1 {
				t.Errorf("the same night twice sent %d warnings", n)
			}
		})
	}
	for _, bad := range [][]string{{"--workers", "cpu"}, {"--workers", "cpu=0"}, {"--deadline", "6am"}} {
		args := append([]string{"nightly", "--fleet", f, "--redis", url, "--store", "file://" + t.TempDir()}, bad...)
		producer(t, args...).wantError(t, "producer", cli.ExitUsage, bad[0])
	}
}
