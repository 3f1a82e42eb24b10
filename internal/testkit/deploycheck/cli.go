package deploycheck

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/internal/cli"
)

// trees builds the command tree of each binary our images run, from the
// constructors the mains in cmd/ call.
var trees = map[string]func() *cobra.Command{
	"producer": cli.NewProducer,
	"worker":   cli.NewWorker,
}

// IsOurs reports whether an executable (a path or a bare name) is one of
// our binaries.
func IsOurs(exe string) bool {
	_, ok := trees[path.Base(exe)]
	return ok
}

// Command is a command line parsed by the real cobra tree of its binary:
// the tree is built once per command line, and every flag a check asks
// about is read from that one parse.
type Command struct {
	Argv []string
	Path string // the command path, e.g. "worker run"
	cmd  *cobra.Command
}

// Flag is the value the command line gives a flag, or its default; "" when
// the command has no such flag.
func (c *Command) Flag(name string) string {
	if c == nil || c.cmd == nil {
		return ""
	}
	if f := c.cmd.Flags().Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// ParseCommand parses argv (executable first) the way the binary would:
// the subcommand is found in the real cobra tree, the flags are parsed by
// its flag set, required flags and argument counts are validated, and the
// command must be runnable (not a group such as `producer bundle`). It
// runs nothing.
func ParseCommand(argv []string) (*Command, error) {
	if len(argv) == 0 {
		return nil, errors.New("empty command line")
	}
	mk, ok := trees[path.Base(argv[0])]
	if !ok {
		return nil, fmt.Errorf("%q is not one of our binaries (producer, worker)", argv[0])
	}
	line := strings.Join(argv, " ")
	cmd, rest, err := mk().Find(argv[1:])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", line, err)
	}
	if len(rest) > 0 && cmd.HasSubCommands() && !strings.HasPrefix(rest[0], "-") {
		// Find stops at the deepest command it knows; a word left over
		// under a group is a mistyped subcommand.
		return nil, fmt.Errorf("%s: unknown command %q for %q", line, rest[0], cmd.CommandPath())
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", line, cmd.CommandPath(), err)
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", line, cmd.CommandPath(), err)
	}
	if err := cmd.ValidateRequiredFlags(); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", line, cmd.CommandPath(), err)
	}
	if !cmd.Runnable() {
		return nil, fmt.Errorf("%s: %s is a group of commands, not a command", line, cmd.CommandPath())
	}
	return &Command{Argv: argv, Path: cmd.CommandPath(), cmd: cmd}, nil
}

// CheckCommand is ParseCommand for a check that needs only the verdict.
func CheckCommand(argv []string) error {
	_, err := ParseCommand(argv)
	return err
}

// Subcommand is the command path argv runs, e.g. "worker run"; "" when
// argv does not parse.
func Subcommand(argv []string) string {
	c, err := ParseCommand(argv)
	if err != nil {
		return ""
	}
	return c.Path
}

// checkGrace: a `worker run` must be given longer than its
// --shutdown-timeout to stop, so that what SIGTERM hands back is not
// killed first. field names the setting (stop_grace_period,
// terminationGracePeriodSeconds) for the message. Compose and Kubernetes
// share it.
func checkGrace(c *Command, grace time.Duration, field string) error {
	if c == nil || c.Path != "worker run" {
		return nil
	}
	st, err := time.ParseDuration(c.Flag("shutdown-timeout"))
	if err != nil {
		return fmt.Errorf("--shutdown-timeout: %w", err)
	}
	if grace <= st {
		return fmt.Errorf("%s %s is not longer than --shutdown-timeout %s: running tasks would be killed, not handed back", field, grace, st)
	}
	return nil
}
