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
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/internal/clip"
)

// Exit codes shared by both binaries, so scripts can tell them apart.
const (
	ExitOK       = 0
	ExitFailed   = 1 // the work ran and did not succeed (e.g. a graph has no winner)
	ExitUsage    = 2 // bad input: unknown flag, invalid bundle, bad candidate
	ExitInternal = 3 // the machine: I/O, missing library
	// ExitVerify: what was fetched or is to be deployed failed a check
	// (a digest, the key, a signature): not the machine's trouble, so
	// retrying cannot help, and not the user's input.
	ExitVerify = 4
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
func verifyErr(err error) error { return &exitError{ExitVerify, err} }

// Execute runs a root command with a context that ends on SIGINT/SIGTERM,
// prints any error once as "<name>: <error>" and returns the exit code.
//
// A command that has not returned StopGrace after the signal (blocked in a
// system call no context reaches, such as an open of a FIFO on a network
// mount) is ended there, with ExitInterrupted: SIGINT and SIGTERM always
// end a command within seconds. A root marked GracefulStop (worker, whose
// --shutdown-timeout hands running tasks back) is left to its own pace.
func Execute(root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan struct{})
	defer close(done)
	if _, graceful := root.Annotations[GracefulStop]; !graceful {
		go hardStop(ctx, done, root.Name(), stderr)
	}
	return ExecuteContext(ctx, root, args, stdout, stderr)
}

// ExitInterrupted is the exit code of a command a signal ended before it
// could finish: 128 + SIGTERM, as a shell reports it.
const ExitInterrupted = 143

// StopGrace is how long a command has, after SIGINT or SIGTERM, to
// return by itself.
const StopGrace = 5 * time.Second

// GracefulStop is the annotation of a root command that handles
// SIGINT/SIGTERM at its own pace.
const GracefulStop = "tunefleet/graceful-stop"

// hardStop ends the process StopGrace after ctx ends (a signal), unless
// Execute returned first (done).
func hardStop(ctx context.Context, done <-chan struct{}, name string, stderr io.Writer) {
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	select {
	case <-done:
	case <-time.After(StopGrace):
		fmt.Fprintf(stderr, "%s: interrupted, and still busy %s later: exiting\n", name, StopGrace)
		os.Exit(ExitInterrupted)
	}
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
	fmt.Fprintf(stderr, "%s: %s\n", root.Name(), cutMessage(err.Error()))
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

// maxMessage bounds a whole error message, whatever it repeats.
const maxMessage = 8000

// cutMessage keeps an error message readable whatever the user gave: a
// word longer than clip.Echo (a path, a model or run name: the errors of
// os, of the bundle and of the store repeat them whole, and a 10,000
// character path or a 3.9 MB name would come back in full) is cut to it,
// saying how much was left out, and the whole message to maxMessage
// characters.
func cutMessage(msg string) string {
	var b strings.Builder
	word := 0 // start of the current run of non-space characters
	flush := func(end int) {
		w := msg[word:end]
		// The punctuation that follows a name ("open NAME: …") stays.
		core := strings.TrimRight(w, `:,;)"'`)
		b.WriteString(clip.Counted(core, clip.Echo) + w[len(core):])
	}
	for i, r := range msg {
		if unicode.IsSpace(r) {
			flush(i)
			b.WriteRune(r)
			word = i + utf8.RuneLen(r)
		}
	}
	flush(len(msg))
	// Through runes, a byte that is not UTF-8 prints as U+FFFD: stderr
	// gets text whatever the error repeated.
	return clip.Counted(string([]rune(b.String())), maxMessage)
}
