package deploycheck

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckCommand runs command lines through the real cobra trees: a flag
// renamed or mistyped in a manifest, a group command, a missing required
// flag or argument each fail with the CLI's own words.
func TestCheckCommand(t *testing.T) {
	for _, tc := range []struct {
		argv    string
		want    string // "" accepts; "pending" wants ErrPending
		pending bool
	}{
		{"worker run --queues cpu --concurrency 2 --health 0.0.0.0:8081 --shutdown-timeout 30s", "", false},
		{"/usr/local/bin/worker run --queues=gpu.h100", "", false},
		{"producer nightly --fleet /etc/fleet.yaml", "", false},
		{"producer --redis redis://r:6379/0 submit /b --target cpu --wait", "", false},
		{"worker healthcheck http://127.0.0.1:8081/healthz", "", false},
		{"worker run --queue cpu", "unknown flag: --queue", false},
		{"worker run --shutdown-timeout soon", `invalid argument "soon"`, false},
		{"worker run --concurrency", "flag needs an argument", false},
		{"producer nightly --fleet", "flag needs an argument: --fleet", false},
		{"producer submit", "requires at least 1 arg", false},
		{"producer bundle valdiate x", `unknown command "valdiate"`, false},
		{"worker runn --queues cpu", "unknown command", false},
		{"redis-server --port 6379", "is not one of our binaries", false},
		{"producer serve --listen 0.0.0.0:8080", "", true},
	} {
		t.Run(tc.argv, func(t *testing.T) {
			err := CheckCommand(strings.Fields(tc.argv))
			switch {
			case tc.pending:
				if !errors.Is(err, ErrPending) {
					t.Fatalf("want ErrPending, got %v", err)
				}
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
		})
	}
}

// TestPendingCommandsAreStillPending fails once the command a pending entry
// names exists: the TODO must then be resolved (the entry removed), so the
// command is checked for real.
func TestPendingCommandsAreStillPending(t *testing.T) {
	for path := range pendingCommands {
		bin, sub, _ := strings.Cut(path, " ")
		cmd, _, err := trees[bin]().Find([]string{sub})
		if err == nil && cmd.CommandPath() == path {
			t.Errorf("%q exists now: remove it from pendingCommands (and its variables from pendingEnv)", path)
		}
	}
}
