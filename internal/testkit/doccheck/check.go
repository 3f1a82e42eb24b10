package doccheck

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"mvdan.cc/sh/v3/syntax"
)

// Trees builds each binary's command tree by its name ("producer",
// "worker"); a fresh tree per command line, since parsing sets flags.
type Trees map[string]func() *cobra.Command

// Checker checks Markdown files of the repository at Root.
type Checker struct {
	Root  string
	Trees Trees
	// MakeTargets, when set, are the Makefile's targets: `make …` lines
	// are then found like our commands, and each target must be one.
	MakeTargets map[string]bool
	docs        map[string]*Doc
}

// makeRule is a rule's line in a Makefile: its targets before the colon
// (not an assignment, :=, nor a pattern or variable target).
var makeRule = regexp.MustCompile(`(?m)^([A-Za-z0-9_.-]+(?:[ \t]+[A-Za-z0-9_.-]+)*)[ \t]*:([^=]|$)`)

// ReadMakeTargets lists a Makefile's targets, .PHONY's included.
func ReadMakeTargets(makefile []byte) map[string]bool {
	out := map[string]bool{}
	for _, m := range makeRule.FindAllStringSubmatch(string(makefile), -1) {
		for _, t := range strings.Fields(m[1]) {
			out[t] = true
		}
	}
	for _, l := range strings.Split(string(makefile), "\n") {
		if rest, ok := strings.CutPrefix(l, ".PHONY:"); ok {
			for _, t := range strings.Fields(rest) {
				out[t] = true
			}
		}
	}
	delete(out, ".PHONY")
	return out
}

// Load parses a repository-relative Markdown file once.
func (c *Checker) Load(rel string) (*Doc, error) {
	rel = path.Clean(filepath.ToSlash(rel))
	if d, ok := c.docs[rel]; ok {
		return d, nil
	}
	src, err := os.ReadFile(filepath.Join(c.Root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	if c.docs == nil {
		c.docs = map[string]*Doc{}
	}
	d := Parse(rel, src)
	c.docs[rel] = d
	return d, nil
}

// lineAnchor is GitHub's anchor for lines of a file that is not Markdown.
var lineAnchor = regexp.MustCompile(`^L[0-9]+(-L[0-9]+)?$`)

// Links checks every relative link and image of d: the file or folder it
// names exists inside the repository, and its #anchor is a heading there.
// It returns how many it checked.
func (c *Checker) Links(d *Doc) (int, []error) {
	var errs []error
	n := 0
	for _, l := range d.Links {
		u, err := url.Parse(l.Dest)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: link %q does not parse: %w", d.Path, l.Line, l.Dest, err))
			continue
		}
		if u.Scheme != "" || u.Host != "" {
			continue // a web address: not the repository's to check
		}
		n++
		target := d.Path
		if u.Path != "" {
			if strings.HasPrefix(u.Path, "/") {
				target = path.Clean(strings.TrimPrefix(u.Path, "/"))
			} else {
				target = path.Join(path.Dir(d.Path), u.Path)
			}
			if target == ".." || strings.HasPrefix(target, "../") {
				errs = append(errs, fmt.Errorf("%s:%d: link %q leaves the repository", d.Path, l.Line, l.Dest))
				continue
			}
			if _, err := os.Stat(filepath.Join(c.Root, filepath.FromSlash(target))); err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: link %q: no file %s in the repository", d.Path, l.Line, l.Dest, target))
				continue
			}
		}
		if u.Fragment == "" {
			continue
		}
		if !strings.HasSuffix(target, ".md") {
			if !lineAnchor.MatchString(u.Fragment) {
				errs = append(errs, fmt.Errorf("%s:%d: link %q: #%s on %s, which has no headings", d.Path, l.Line, l.Dest, u.Fragment, target))
			}
			continue
		}
		td, err := c.Load(target)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: link %q: %w", d.Path, l.Line, l.Dest, err))
			continue
		}
		if !slices.Contains(td.Anchors, u.Fragment) {
			errs = append(errs, fmt.Errorf("%s:%d: link %q: %s has no heading #%s%s", d.Path, l.Line, l.Dest, target, u.Fragment, nearest(u.Fragment, td.Anchors)))
		}
	}
	return n, errs
}

// nearest suggests the heading a stale anchor probably meant.
func nearest(want string, have []string) string {
	for _, h := range have {
		if strings.Contains(h, want) || strings.Contains(want, h) {
			return fmt.Sprintf(" (did you mean #%s?)", h)
		}
	}
	return ""
}

// shellLangs are the code blocks read as shell scripts; "console" blocks
// are read by their "$ " lines, and blocks without a language by the lines
// that start with one of our commands (the rest is output).
var shellLangs = []string{"sh", "bash", "shell", "zsh"}

// A Command is one of our command lines found in a doc.
type Command struct {
	Argv   []string // executable first, words as the shell gives them (expansions as "X")
	Line   int
	Inline bool // from an inline code span: checked for names and flags only
}

// Commands finds every producer/worker command line in d's code.
func (c *Checker) Commands(d *Doc) ([]Command, []error) {
	var (
		cmds []Command
		errs []error
	)
	for _, b := range d.Blocks {
		switch {
		case slices.Contains(shellLangs, b.Lang):
			got, err := c.shellCommands(b.Text, b.Line)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: %s block is not shell: %w", d.Path, b.Line, b.Lang, err))
			}
			cmds = append(cmds, got...)
		case b.Lang == "console" || b.Lang == "":
			for _, l := range logicalLines(b.Text, b.Line) {
				s, prompt := strings.CutPrefix(strings.TrimSpace(l.text), "$ ")
				if b.Lang == "console" && !prompt {
					continue // output
				}
				if f := strings.Fields(s); b.Lang == "" && (len(f) == 0 || !c.ours(f[0])) {
					continue // output that does not show our command
				}
				got, err := c.shellCommands(s, l.line)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s:%d: command line is not shell: %w", d.Path, l.line, err))
				}
				cmds = append(cmds, got...)
			}
		}
	}
	for _, s := range d.Inline {
		t := strings.TrimPrefix(strings.TrimSpace(s.Text), "$ ")
		f := strings.Fields(strings.NewReplacer("[", " ", "]", " ").Replace(t))
		if len(f) < 2 || !c.ours(f[0]) {
			continue
		}
		// Prose shows one command: what follows a pipe or && is another.
		if i := slices.IndexFunc(f, func(w string) bool { return w == "|" || w == "&&" || w == ";" || w == "||" }); i >= 0 {
			f = f[:i]
		}
		f = slices.DeleteFunc(f, func(w string) bool { return w == "…" || w == "..." })
		cmds = append(cmds, Command{Argv: f, Line: s.Line, Inline: true})
	}
	return cmds, errs
}

func (c *Checker) ours(exe string) bool {
	if exe == "make" {
		return c.MakeTargets != nil
	}
	_, ok := c.Trees[path.Base(exe)]
	return ok
}

type logicalLine struct {
	text string
	line int
}

// logicalLines joins lines continued with a trailing backslash.
func logicalLines(text string, first int) []logicalLine {
	var (
		out []logicalLine
		cur strings.Builder
		at  = first
	)
	for i, l := range strings.Split(text, "\n") {
		if cur.Len() == 0 {
			at = first + i
		}
		if s, ok := strings.CutSuffix(strings.TrimRight(l, " \t"), `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(l)
		out = append(out, logicalLine{cur.String(), at})
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, logicalLine{cur.String(), at})
	}
	return out
}

// shellCommands parses a piece of shell and returns the calls of our
// binaries in it, wherever they stand (pipes, &&, $(…), env prefixes).
func (c *Checker) shellCommands(script string, first int) ([]Command, error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(script), "")
	if err != nil {
		return nil, err
	}
	var cmds []Command
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		argv := make([]string, len(call.Args))
		for i, w := range call.Args {
			argv[i] = wordText(w)
		}
		if c.ours(argv[0]) {
			cmds = append(cmds, Command{Argv: argv, Line: first + int(call.Pos().Line()) - 1})
		}
		return true
	})
	return cmds, nil
}

// wordText is a word as the shell would pass it, with every expansion
// ($VAR, $(…), $((…))) standing as "X": a placeholder value.
func wordText(w *syntax.Word) string {
	var b strings.Builder
	var parts func([]syntax.WordPart)
	parts = func(ps []syntax.WordPart) {
		for _, p := range ps {
			switch p := p.(type) {
			case *syntax.Lit:
				b.WriteString(p.Value)
			case *syntax.SglQuoted:
				b.WriteString(p.Value)
			case *syntax.DblQuoted:
				parts(p.Parts)
			default:
				b.WriteString("X")
			}
		}
	}
	parts(w.Parts)
	return b.String()
}

// Check parses one command line against the real tree of its binary: the
// subcommand exists and every flag exists on it; for a command line of a
// code block also the argument count, the required flags, and that it is a
// command rather than a group. It runs nothing.
func (c *Checker) Check(cmd Command) error {
	argv := cmd.Argv
	line := strings.Join(argv, " ")
	if argv[0] == "make" {
		return c.checkMake(argv)
	}
	mk, ok := c.Trees[path.Base(argv[0])]
	if !ok {
		return fmt.Errorf("%q is not one of our binaries", argv[0])
	}
	root := mk()
	sub, rest, err := root.Find(argv[1:])
	if err != nil {
		return fmt.Errorf("%s: %w", line, err)
	}
	if len(rest) > 0 && sub.HasSubCommands() && !strings.HasPrefix(rest[0], "-") {
		// Find stops at the deepest command it knows; a word left over
		// under a group is a mistyped subcommand.
		return fmt.Errorf("%s: unknown command %q for %q", line, rest[0], sub.CommandPath())
	}
	sub.InitDefaultHelpFlag()
	if cmd.Inline {
		// Prose names flags without values, or with placeholders
		// (--limit N): that the flags exist is what it can be held to.
		for _, w := range rest {
			if err := flagExists(sub, w); err != nil {
				return fmt.Errorf("%s: %s: %w", line, sub.CommandPath(), err)
			}
		}
		return nil
	}
	if err := sub.ParseFlags(rest); err != nil {
		return fmt.Errorf("%s: %s: %w", line, sub.CommandPath(), err)
	}
	if err := sub.ValidateArgs(sub.Flags().Args()); err != nil {
		return fmt.Errorf("%s: %s: %w", line, sub.CommandPath(), err)
	}
	if err := sub.ValidateRequiredFlags(); err != nil {
		return fmt.Errorf("%s: %s: %w", line, sub.CommandPath(), err)
	}
	if !sub.Runnable() {
		return errors.New(line + ": " + sub.CommandPath() + " is a group of commands, not a command")
	}
	return nil
}

// flagExists checks that a word that looks like a flag (--name, --name=v,
// -x, -xv) is one of cmd's own or inherited flags; other words pass.
func flagExists(cmd *cobra.Command, w string) error {
	fs := cmd.Flags()
	fs.AddFlagSet(cmd.InheritedFlags())
	switch {
	case w == "-" || w == "--" || !strings.HasPrefix(w, "-"):
		return nil
	case strings.HasPrefix(w, "--"):
		name, _, _ := strings.Cut(w[2:], "=")
		if fs.Lookup(name) == nil {
			return fmt.Errorf("unknown flag: --%s", name)
		}
	default:
		if fs.ShorthandLookup(w[1:2]) == nil {
			return fmt.Errorf("unknown shorthand flag: %q in %s", w[1:2], w)
		}
	}
	return nil
}

// checkMake wants every target a make line names to be the Makefile's
// (variables, VAR=value, and -j/-k-style options pass).
func (c *Checker) checkMake(argv []string) error {
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "-C" || a == "-f" || a == "--directory" || a == "--file":
			i++ // their value is a path
		case strings.HasPrefix(a, "-") || strings.Contains(a, "="):
		case !c.MakeTargets[a]:
			return fmt.Errorf("%s: the Makefile has no target %q", strings.Join(argv, " "), a)
		}
	}
	return nil
}
