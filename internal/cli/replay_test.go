package cli_test

import (
	"testing"

	"github.com/tunefleet/tunefleet/backend/replay"
)

// TestWorkerRefusesABadReplaySpec: a TUNEFLEET_REPLAY that does not parse
// is bad input (exit 2, naming the variable and the key), refused before
// Redis or the store is opened (neither exists here), so that a fleet
// meant to be simulated never tunes for real by mistake.
func TestWorkerRefusesABadReplaySpec(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"scale=0", "scale=0: must be > 0"},
		{"dist=weibull", "unknown distribution"},
		{"speed=2", "unknown key"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			t.Setenv(replay.Env, tc.spec)
			worker(t, "run", "--redis", "redis://127.0.0.1:1/0", "--store", "file:///nonexistent/tunefleet", "--queues", "cpu").
				wantFailure(t, "worker", 2, replay.Env, tc.want)
		})
	}
}
