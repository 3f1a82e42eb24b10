package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes shared by both binaries, so scripts can tell them apart.
const (
	ExitOK       = 0
	ExitFailed   = 1 // the work ran and did not succeed (e.g. a graph has no winner)
	ExitUsage    = 2 // bad input: unknown flag, invalid bundle, bad candidate
	ExitInternal = 3 // the machine: I/O, missing library
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(err error) error  { return &exitError{ExitUsage, err} }
func failedErr(err error) error { return &exitError{ExitFailed, err} }

// Execute runs a root command with a context that ends on SIGINT/SIGTERM,
// prints any error once as "<name>: <error>" and returns the exit code.
func Execute(root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return ExecuteContext(ctx, root, args, stdout, stderr)
}

// ExecuteContext is Execute under a context the caller ends (Execute's
// ends on SIGINT/SIGTERM): what a signal does, a test can do.
func ExecuteContext(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SilenceErrors = true
	root.SilenceUsage = true
	// Flag errors are the user's: mark them so they exit with ExitUsage.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(stderr, "%s: %v\n", root.Name(), err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if isCobraUsage(err) {
		return ExitUsage
	}
	return ExitInternal
}

// isCobraUsage recognises cobra's own argument errors ("unknown command",
// "accepts 1 arg(s)"), which it returns as plain errors. They start with
// these words; an error that only contains them (an I/O error ending in
// EINVAL's "invalid argument") is not the user's.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires exactly", "unknown flag", "unknown shorthand flag", "invalid argument", "required flag"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
