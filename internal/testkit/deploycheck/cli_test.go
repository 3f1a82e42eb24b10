package deploycheck

import (
	"strings"
	"testing"
)

// TestCheckCommand runs command lines through the real cobra trees: a flag
// renamed or mistyped in a manifest, a group command, a missing required
// flag or argument each fail with the CLI's own words.
func TestCheckCommand(t *testing.T) {
	for _, tc := range []struct {
		argv string
		want string // "" accepts
	}{
		{"worker run --queues cpu --concurrency 2 --health 0.0.0.0:8081 --shutdown-timeout 30s", ""},
		{"/usr/local/bin/worker run --queues=gpu.h100", ""},
		{"producer nightly --fleet /etc/fleet.yaml", ""},
		{"producer --redis redis://r:6379/0 submit /b --target cpu --wait", ""},
		{"worker healthcheck http://127.0.0.1:8081/healthz", ""},
		{"worker run --queue cpu", "unknown flag: --queue"},
		{"worker run --shutdown-timeout soon", `invalid argument "soon"`},
		{"worker run --concurrency", "flag needs an argument"},
		{"producer nightly --fleet", "flag needs an argument: --fleet"},
		{"producer submit", "requires at least 1 arg"},
		{"producer bundle valdiate x", `unknown command "valdiate"`},
		{"worker runn --queues cpu", "unknown command"},
		{"redis-server --port 6379", "is not one of our binaries"},
		{"producer serve --listen 0.0.0.0:8080", ""},
		{"producer serve --listen", "flag needs an argument: --listen"},
	} {
		t.Run(tc.argv, func(t *testing.T) {
			err := CheckCommand(strings.Fields(tc.argv))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
		})
	}
}
