package deploycheck

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// Image is what a Dockerfile's final stage gives a container.
type Image struct {
	Path        string   // the Dockerfile, relative to the build context
	Bases       []string // every stage's FROM, ARG defaults expanded
	Stages      []string // stage names, in order
	User        string   // the final stage's last USER ("" when none)
	Entrypoint  []string // exec form
	Cmd         []string // exec form
	Healthcheck []string // the HEALTHCHECK test, e.g. CMD worker healthcheck URL
	Copies      []Copy   // COPY/ADD sources from the build context
	shellForm   []string // ENTRYPOINT/CMD given in shell form (refused)
}

// Copy is one COPY or ADD source taken from the build context.
type Copy struct {
	Line   int
	Source string
}

// ParseDockerfile reads a Dockerfile with BuildKit's own parser and
// instruction decoder, as `docker build` does.
func ParseDockerfile(context, rel string) (*Image, error) {
	f, err := os.Open(filepath.Join(context, rel))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseDockerfile(rel, f)
}

func parseDockerfile(rel string, r io.Reader) (*Image, error) {
	res, err := parser.Parse(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	stages, metaArgs, err := instructions.Parse(res.AST, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	args := map[string]string{}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			if kv.Value != nil {
				args[kv.Key] = *kv.Value
			}
		}
	}
	img := &Image{Path: rel}
	for i, st := range stages {
		img.Bases = append(img.Bases, os.Expand(st.BaseName, func(k string) string { return args[k] }))
		img.Stages = append(img.Stages, st.Name)
		last := i == len(stages)-1
		for _, c := range st.Commands {
			img.add(c, last)
		}
	}
	return img, nil
}

// add records one instruction; only the final stage's USER, ENTRYPOINT,
// CMD and HEALTHCHECK reach the container.
func (img *Image) add(c instructions.Command, final bool) {
	switch c := c.(type) {
	case *instructions.CopyCommand:
		if c.From == "" {
			img.addSources(c.Location(), c.SourcePaths)
		}
	case *instructions.AddCommand:
		img.addSources(c.Location(), c.SourcePaths)
	}
	if !final {
		return
	}
	switch c := c.(type) {
	case *instructions.UserCommand:
		img.User = c.User
	case *instructions.EntrypointCommand:
		img.Entrypoint = c.CmdLine
		if c.PrependShell {
			img.shellForm = append(img.shellForm, "ENTRYPOINT")
		}
	case *instructions.CmdCommand:
		img.Cmd = c.CmdLine
		if c.PrependShell {
			img.shellForm = append(img.shellForm, "CMD")
		}
	case *instructions.HealthCheckCommand:
		img.Healthcheck = c.Health.Test
	}
}

func (img *Image) addSources(loc []parser.Range, srcs []string) {
	line := 0
	if len(loc) > 0 {
		line = loc[0].Start.Line
	}
	for _, s := range srcs {
		img.Copies = append(img.Copies, Copy{Line: line, Source: s})
	}
}

// Argv is the command line a container of this image runs, given a
// manifest's entrypoint and command overrides (nil: the image's). As in
// Docker, an entrypoint override drops the image's CMD.
func (img *Image) Argv(entrypoint, command []string) []string {
	ep, cmd := img.Entrypoint, img.Cmd
	if entrypoint != nil {
		ep, cmd = entrypoint, nil
	}
	if command != nil {
		cmd = command
	}
	return append(append([]string{}, ep...), cmd...)
}

var digestRE = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)

// CheckImage checks a parsed Dockerfile: every base is an earlier stage or
// pinned by digest, every COPY source exists in the build context, the
// final user is not root, the entrypoint and command are a real command of
// our CLI in exec form, and the HEALTHCHECK runs our binary's probe on
// /healthz.
func CheckImage(context string, img *Image) (errs []error) {
	for i, b := range img.Bases {
		if stageBefore(img.Stages[:i], b) {
			continue
		}
		if !digestRE.MatchString(b) {
			errs = append(errs, fmt.Errorf("%s: FROM %s is not pinned: give the base as NAME:TAG@sha256:DIGEST", img.Path, b))
		}
	}
	for _, c := range img.Copies {
		if err := sourceExists(context, c.Source); err != nil {
			errs = append(errs, fmt.Errorf("%s line %d: COPY %s: %w", img.Path, c.Line, c.Source, err))
		}
	}
	if u, _, _ := strings.Cut(img.User, ":"); u == "" || u == "root" || u == "0" {
		errs = append(errs, fmt.Errorf("%s: the final stage runs as root (USER %q): add USER with a non-root uid", img.Path, img.User))
	}
	for _, f := range img.shellForm {
		errs = append(errs, fmt.Errorf("%s: %s is in shell form: write it as a JSON array, so that signals reach the binary", img.Path, f))
	}
	argv := img.Argv(nil, nil)
	if err := CheckCommand(argv); err != nil {
		errs = append(errs, fmt.Errorf("%s: ENTRYPOINT+CMD: %w", img.Path, err))
	}
	errs = append(errs, checkHealthcheck(img.Path+": HEALTHCHECK", img.Healthcheck)...)
	return errs
}

// checkHealthcheck wants a probe of /healthz by our own binary (the images
// have no curl): CMD producer|worker healthcheck http://…/healthz.
func checkHealthcheck(where string, test []string) []error {
	if len(test) < 2 || test[0] != "CMD" {
		return []error{fmt.Errorf("%s: want [\"CMD\", \"worker\"|\"producer\", \"healthcheck\", \"http://127.0.0.1:PORT/healthz\"], got %q", where, test)}
	}
	argv := test[1:]
	cmd, err := ParseCommand(argv)
	if err != nil {
		return []error{fmt.Errorf("%s: %w", where, err)}
	}
	if !strings.HasSuffix(cmd.Path, " healthcheck") || len(argv) < 3 || !strings.HasSuffix(argv[2], "/healthz") {
		return []error{fmt.Errorf("%s: %q does not probe a /healthz with `healthcheck URL`", where, argv)}
	}
	return nil
}

func stageBefore(stages []string, name string) bool {
	for _, s := range stages {
		if s != "" && strings.EqualFold(s, name) {
			return true
		}
	}
	return false
}

// sourceExists checks a COPY source (a path or a glob) inside the build
// context, which it must not leave.
func sourceExists(context, src string) error {
	clean := filepath.Clean(filepath.FromSlash(src))
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return fmt.Errorf("leaves the build context")
	}
	if p := ignoredBy(context, filepath.ToSlash(clean)); p != "" {
		return fmt.Errorf("excluded from the build context by .dockerignore (%s)", p)
	}
	matches, err := filepath.Glob(filepath.Join(context, clean))
	if err != nil {
		return err
	}
	if len(matches) == 0 {
		return fmt.Errorf("no such file in the build context (the repository root)")
	}
	return nil
}

// ignoredBy is the .dockerignore pattern that excludes src or a folder
// above it, or "". Only plain patterns are understood (no "!" exceptions;
// ours has none).
func ignoredBy(context, src string) string {
	f, err := os.Open(filepath.Join(context, ".dockerignore"))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.TrimSpace(sc.Text())
		if p == "" || strings.HasPrefix(p, "#") || strings.HasPrefix(p, "!") {
			continue
		}
		for s := src; s != "." && s != "/"; s = filepath.ToSlash(filepath.Dir(s)) {
			if ok, _ := filepath.Match(strings.TrimPrefix(p, "**/"), s); ok {
				return p
			}
		}
	}
	return ""
}
