package cli

import (
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// The grammar both binaries share (docs/cli-grammar.md says it to users;
// TestCLIGrammar walks both command trees and holds every command to it):
//
//   - -o/--output is the output format, and nothing else: json, or the
//     human form, which is a table or text; "table" and "text" are
//     synonyms everywhere, so a script never has to know which one a
//     command prints.
//   - a directory to write is --out, with no short form.
//   - progress and transfer lines go to stderr only on a terminal, or
//     when --progress asks; -q/--quiet drops them even there.
//   - exit codes: ExitOK, ExitFailed, ExitUsage (not found included),
//     ExitInternal (exit.go).

// okFormat normalizes *format ("table" and "text" both name the human
// form, which is human) and says whether it is one a command knows.
func okFormat(format *string, human string) bool {
	switch *format {
	case "text", "table":
		*format = human
		return true
	case "json":
		return true
	}
	return false
}

// progressFlags are the root's --progress and -q/--quiet, which every
// command that writes progress reads through progressTo.
type progressFlags struct {
	force bool
	quiet bool
}

func (p *progressFlags) register(cmd *cobra.Command) {
	cmd.PersistentFlags().BoolVar(&p.force, "progress", false, "write progress and transfer lines on stderr even when it is not a terminal")
	cmd.PersistentFlags().BoolVarP(&p.quiet, "quiet", "q", false, "no progress or transfer lines, even on a terminal (for scripts)")
}

// progressMode is how a command shows progress on w.
type progressMode int

const (
	progressNone  progressMode = iota // nothing: a pipe or a file that did not ask
	progressLines                     // plain lines, one per step (--progress off a terminal)
	progressLive                      // redrawn in place (a terminal)
)

// progressOn says how progress is shown on w under cmd's flags: on a
// terminal it is live, elsewhere only with --progress (a script merging
// stderr into -o json must get only JSON), and never with -q.
func progressOn(cmd *cobra.Command, w io.Writer) progressMode {
	quiet, _ := cmd.Flags().GetBool("quiet")
	force, _ := cmd.Flags().GetBool("progress")
	switch {
	case quiet:
		return progressNone
	case isTerminal(w):
		return progressLive
	case force:
		return progressLines
	}
	return progressNone
}

// followOut is where a follower's lines (a run's progress, Redis
// failing and answering again) go: stderr for the human form, unless -q;
// with -o json or jsonl only when stderr is a terminal (and not -q), so
// that a script merging stderr into the JSON reads only JSON.
func followOut(cmd *cobra.Command, format string) io.Writer {
	if quiet, _ := cmd.Flags().GetBool("quiet"); quiet {
		return io.Discard
	}
	if format != "text" && !isTerminal(cmd.ErrOrStderr()) {
		return io.Discard
	}
	return cmd.ErrOrStderr()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// storeLocation is where key lies in the store, written so that a user
// can use it: a local path for file://, and for s3:// the object's URL
// (s3://BUCKET/PREFIX/KEY, as aws s3 cp takes it) with the endpoint and
// region said apart, not a query glued before the key.
func storeLocation(store, key string) string {
	u, err := url.Parse(store)
	if err != nil {
		return strings.TrimSuffix(store, "/") + "/" + key
	}
	switch u.Scheme {
	case "file":
		return filepath.Join(strings.TrimPrefix(strings.SplitN(store, "?", 2)[0], "file://"), key)
	case "s3":
		loc := "s3://" + path.Join(u.Host, u.Path, key)
		q := u.Query()
		var extra []string
		if ep := q.Get("endpoint"); ep != "" {
			extra = append(extra, "endpoint "+ep)
		}
		if r := q.Get("region"); r != "" {
			extra = append(extra, "region "+r)
		}
		if len(extra) > 0 {
			loc += " (" + strings.Join(extra, ", ") + ")"
		}
		return loc
	}
	u.RawQuery = ""
	return strings.TrimSuffix(u.String(), "/") + "/" + key
}

// Times for people are internal/human's, in UTC and saying so, in every
// table, live header, page, report and webhook (a table pasted into a
// ticket is read in another zone than it was printed in); machine output
// (-o json) is RFC 3339 in UTC.
