package deploycheck

import (
	"errors"
	"fmt"
	"path"
	"strings"

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

// CheckCommand parses argv (executable first) the way the binary would:
// the subcommand is found in the real cobra tree, the flags are parsed by
// its flag set, required flags and argument counts are validated, and the
// command must be runnable (not a group such as `producer bundle`). It
// runs nothing.
func CheckCommand(argv []string) error {
	if len(argv) == 0 {
		return errors.New("empty command line")
	}
	mk, ok := trees[path.Base(argv[0])]
	if !ok {
		return fmt.Errorf("%q is not one of our binaries (producer, worker)", argv[0])
	}
	root := mk()
	cmd, rest, err := root.Find(argv[1:])
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	if len(rest) > 0 && cmd.HasSubCommands() && !strings.HasPrefix(rest[0], "-") {
		// Find stops at the deepest command it knows; a word left over
		// under a group is a mistyped subcommand.
		return fmt.Errorf("%s: unknown command %q for %q", strings.Join(argv, " "), rest[0], cmd.CommandPath())
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return fmt.Errorf("%s: %s: %w", strings.Join(argv, " "), cmd.CommandPath(), err)
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return fmt.Errorf("%s: %s: %w", strings.Join(argv, " "), cmd.CommandPath(), err)
	}
	if err := cmd.ValidateRequiredFlags(); err != nil {
		return fmt.Errorf("%s: %s: %w", strings.Join(argv, " "), cmd.CommandPath(), err)
	}
	if !cmd.Runnable() {
		return fmt.Errorf("%s: %s is a group of commands, not a command", strings.Join(argv, " "), cmd.CommandPath())
	}
	return nil
}

// FlagValue is the value argv gives a flag of its command (after
// CheckCommand accepted it), or its default; "" when it has no such flag.
func FlagValue(argv []string, name string) string {
	mk, ok := trees[path.Base(argv[0])]
	if !ok {
		return ""
	}
	cmd, rest, err := mk().Find(argv[1:])
	if err != nil || cmd.ParseFlags(rest) != nil {
		return ""
	}
	if f := cmd.Flags().Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// Subcommand is the command path argv runs, e.g. "worker run".
func Subcommand(argv []string) string {
	mk, ok := trees[path.Base(argv[0])]
	if !ok {
		return ""
	}
	cmd, _, err := mk().Find(argv[1:])
	if err != nil {
		return ""
	}
	return cmd.CommandPath()
}
