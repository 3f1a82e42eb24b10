package doccheck_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/doccheck"
)

// trees are the command trees the mains in cmd/ build.
var trees = doccheck.Trees{"producer": cli.NewProducer, "worker": cli.NewWorker}

// readmeMaxLines keeps README.md to what tunefleet is, how to start and
// where to read on; the rest belongs in docs/.
const readmeMaxLines = 300

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	return root
}

// docFiles are README.md and every docs/*.md, repository-relative.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, f := range files {
		out = append(out, "docs/"+filepath.Base(f))
	}
	return out
}

// loadDocs parses README.md and docs/*.md through c, which keeps each.
func loadDocs(t *testing.T, c *doccheck.Checker) []*doccheck.Doc {
	t.Helper()
	var docs []*doccheck.Doc
	for _, f := range docFiles(t, c.Root) {
		d, err := c.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	return docs
}

// TestDocsLinksResolve: every relative link, image and #anchor in README.md
// and docs/*.md resolves, and every docs/*.md can be reached from README.md.
func TestDocsLinksResolve(t *testing.T) {
	root := repoRoot(t)
	c := &doccheck.Checker{Root: root, Trees: trees}
	files := docFiles(t, root)
	if len(files) < 10 {
		t.Fatalf("found %d Markdown files (README.md and docs/*.md), want the README and its topics: %v", len(files), files)
	}
	total := 0
	linksTo := map[string][]string{}
	for _, f := range files {
		d, err := c.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		n, errs := c.Links(d)
		total += n
		for _, err := range errs {
			t.Error(err)
		}
		for _, l := range d.Links {
			p, _, _ := strings.Cut(l.Dest, "#")
			if p != "" && !strings.Contains(p, "://") {
				linksTo[f] = append(linksTo[f], filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(f), p))))
			}
		}
	}
	if total < 50 {
		t.Errorf("checked %d relative links, want the docs' cross-references (at least 50): is the link reader blind?", total)
	}
	// Reachable from the README: a topic nobody links to is lost.
	seen := map[string]bool{"README.md": true}
	for queue := []string{"README.md"}; len(queue) > 0; queue = queue[1:] {
		for _, to := range linksTo[queue[0]] {
			if !seen[to] {
				seen[to] = true
				queue = append(queue, to)
			}
		}
	}
	for _, f := range files {
		if !seen[f] {
			t.Errorf("%s is linked from nowhere reachable from README.md: add it to the README's table of docs", f)
		}
	}
}

// TestREADMEIsShort: the README says what tunefleet is, how to start and
// where to read on, and keeps the command CI runs.
func TestREADMEIsShort(t *testing.T) {
	root := repoRoot(t)
	c := &doccheck.Checker{Root: root, Trees: trees}
	d, err := c.Load("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if d.Lines() > readmeMaxLines {
		t.Errorf("README.md has %d lines, want at most %d: move the detail into docs/<topic>.md and link it", d.Lines(), readmeMaxLines)
	}
	for _, want := range []string{"make test", "make demo", "make test-short"} {
		found := false
		for _, b := range d.Blocks {
			if slices.ContainsFunc(strings.Split(b.Text, "\n"), func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), want) }) {
				found = true
			}
		}
		if !found {
			t.Errorf("README.md shows no %q in a code block", want)
		}
	}
}

// TestDocsCommandsParse: every producer/worker command line shown in
// README.md and docs/*.md parses against the real cobra trees, and every
// make target they show is the Makefile's.
func TestDocsCommandsParse(t *testing.T) {
	root := repoRoot(t)
	mf, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	c := &doccheck.Checker{Root: root, Trees: trees, MakeTargets: doccheck.ReadMakeTargets(mf)}
	if !c.MakeTargets["test"] || !c.MakeTargets["demo"] || !c.MakeTargets["test-short"] {
		t.Fatalf("Makefile targets %v: no test, demo or test-short", c.MakeTargets)
	}
	blocks, inline := 0, 0
	for _, d := range loadDocs(t, c) {
		cmds, errs := c.Commands(d)
		for _, err := range errs {
			t.Error(err)
		}
		for _, cmd := range cmds {
			if cmd.Inline {
				inline++
			} else {
				blocks++
			}
			if err := c.Check(cmd); err != nil {
				t.Errorf("%s:%d: %v", d.Path, cmd.Line, err)
			}
		}
	}
	t.Logf("%d command lines in code blocks and %d in inline code checked", blocks, inline)
	if blocks < 30 || inline < 20 {
		t.Errorf("checked %d command lines in code blocks and %d inline, want the tour's (at least 30 and 20): is the command reader blind?", blocks, inline)
	}
}

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Two commands", "two-commands"},
		{"Exit codes", "exit-codes"},
		{"result.json (tunefleet.result/v1)", "resultjson-tunefleetresultv1"},
		{"What lives in Redis, and for how long", "what-lives-in-redis-and-for-how-long"},
		{"Bundle format (v1)", "bundle-format-v1"},
		{"Producer → store/queue → worker", "producer--storequeue--worker"},
		{"snake_case and kebab-case", "snake_case-and-kebab-case"},
		{"Über Größe", "über-größe"},
	} {
		if got := doccheck.Slug(tc.heading); got != tc.want {
			t.Errorf("Slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

// TestDocsTablesAreTables: no line of README.md or docs/*.md is a table
// row outside a table (issue 21's stop found a row of the README's docs
// table pasted into its Status list).
func TestDocsTablesAreTables(t *testing.T) {
	root := repoRoot(t)
	tables := 0
	for _, d := range loadDocs(t, &doccheck.Checker{Root: root, Trees: trees}) {
		tables += d.Tables
		for _, r := range d.StrayRows {
			t.Errorf("%s:%d: a table row outside any table (move it into its table, or give the table its header and |---| line): %.80s", d.Path, r.Line, r.Text)
		}
	}
	if tables < 20 {
		t.Errorf("parsed %d tables in README.md and docs/*.md, want their figures and references (at least 20): is the table reader blind?", tables)
	}
}

// TestStrayRows: a row in a list or paragraph, or a table missing its
// delimiter line, is found; real tables, inline pipes and code are not.
func TestStrayRows(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    string
		want   []int // lines of stray rows
		tables int
	}{
		{"a table", "| a | b |\n|---|---|\n| 1 | 2 |\n", nil, 1},
		{"a table after a paragraph", "Text.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n", nil, 1},
		{"a table in a list item", "- item\n\n  | a | b |\n  |---|---|\n  | 1 | 2 |\n", nil, 1},
		{"pipes in running text", "a | b and `| c |`\n", nil, 0},
		{"a row in a code block", "```\n| a | b |\n```\n", nil, 0},
		{"a row pasted into a list", "- one;\n| [x](x.md) | what x is |\n- two\n", []int{2}, 0},
		{"a row after a paragraph", "Text.\n| a | b |\n", []int{2}, 0},
		{"no delimiter line", "| a | b |\n| 1 | 2 |\n", []int{1, 2}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := doccheck.Parse("x.md", []byte(tc.src))
			var got []int
			for _, r := range d.StrayRows {
				got = append(got, r.Line)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("stray rows at lines %v, want %v", got, tc.want)
			}
			if want := tc.tables; d.Tables != want {
				t.Errorf("%d tables parsed, want %d", d.Tables, want)
			}
		})
	}
}

// TestDocsShowTheCurrentTableHeaders: every table header of a producer or
// worker command shown in README.md and docs/*.md is the one the command
// prints now (a column added to a table left every example of it stale).
func TestDocsShowTheCurrentTableHeaders(t *testing.T) {
	root := repoRoot(t)
	headers, err := doccheck.TableHeaders(filepath.Join(root, "internal", "cli"))
	if err != nil {
		t.Fatal(err)
	}
	if len(headers) < 5 {
		t.Fatalf("read %d table headers from internal/cli, want its status, tune, compare, history and nightly tables (at least 5): is the reader blind?", len(headers))
	}
	total := 0
	for _, d := range loadDocs(t, &doccheck.Checker{Root: root, Trees: trees}) {
		stale, shown := doccheck.StaleHeaders(d, headers)
		total += shown
		for _, s := range stale {
			t.Errorf("%s:%d: a table header as the command no longer prints it (capture the output again): %.120s", d.Path, s.Line, s.Text)
		}
	}
	if total < 4 {
		t.Errorf("found %d table headers in the docs, want the examples of status and worker tune (at least 4): is the block reader blind?", total)
	}
}

// TestStaleHeaders: a header with a column missing, added or renamed is
// found; the current one, a row of data and a line of another table are
// not.
func TestStaleHeaders(t *testing.T) {
	headers := [][]string{{"GRAPH", "STATUS", "WINNER", "BEST SAMPLES/S", "NOTE"}, {"GRAPH", "CANDIDATE", "STATUS"}, {"RUN", "MODEL", "STATUS"}}
	for _, tc := range []struct {
		name  string
		block string
		stale []int // lines in the document
		shown int
	}{
		{"current", "GRAPH  STATUS  WINNER  BEST SAMPLES/S  NOTE\n0      done    a       1.2M            x", nil, 1},
		{"a column missing", "GRAPH  STATUS  WINNER  NOTE\n", []int{2}, 1},
		{"a column added", "run x: done\nRUN  MODEL  STATUS  TOOK\n", []int{3}, 1},
		{"a column renamed second", "GRAPH  WINNER  STATUS  BEST SAMPLES/S  NOTE\n", []int{2}, 1},
		{"two tables, one stale", "GRAPH  STATUS  WINNER  BEST SAMPLES/S  NOTE\nRUN  MODEL  STAT\n", []int{3}, 2},
		{"two headers with one first column", "GRAPH  CANDIDATE  STATUS\nGRAPH  STATUS  WINNER  BEST SAMPLES/S  NOTE\n", nil, 2},
		{"not our table", "MODEL  TARGET\nNAME  READY  STATUS\n", nil, 0},
		{"a row of data", "GRAPH  done  x\nRUN  3  FAILED\n", nil, 0},
		{"one space is inside a column", "GRAPH STATUS WINNER\n", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := doccheck.Parse("x.md", []byte("```\n"+tc.block+"\n```\n"))
			stale, shown := doccheck.StaleHeaders(d, headers)
			var got []int
			for _, s := range stale {
				got = append(got, s.Line)
			}
			if !slices.Equal(got, tc.stale) || shown != tc.shown {
				t.Errorf("stale at lines %v, %d shown; want %v, %d", got, shown, tc.stale, tc.shown)
			}
		})
	}
}

func TestParseHeadingsAsGitHub(t *testing.T) {
	d := doccheck.Parse("x.md", []byte("# A `code` *head*\n\n## Repeat\n\n## Repeat\n\nSetext\n------\n\n## [Linked](y.md) one\n"))
	want := []string{"a-code-head", "repeat", "repeat-1", "setext", "linked-one"}
	if !slices.Equal(d.Anchors, want) {
		t.Errorf("anchors %q, want %q", d.Anchors, want)
	}
}

// TestLinksFail: each broken link is reported, the good ones are not.
func TestLinksFail(t *testing.T) {
	root := t.TempDir()
	write := func(rel, s string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/b.md", "# Bee\n\n## Exit codes\n")
	write("docs/pic.png", "png")
	write("main.go", "package main\n")
	write("README.md", `# Top

## Here

Good: [b](docs/b.md), [exit](docs/b.md#exit-codes), [here](#here), ![pic](docs/pic.png),
[dir](docs/), [line](main.go#L1), [web](https://example.com/x#y), [root](/docs/b.md#bee).

Bad: [gone](docs/nope.md), [anchor](docs/b.md#exit-code), [self](#there),
[out](../shared/DESIGN.md), ![img](docs/missing.png), [code](main.go#main).

<img src="docs/pic.png" alt="ok"> and <a href='docs/b.md#bee'>ok</a>, but <img src="docs/gone.png">.
`)
	c := &doccheck.Checker{Root: root}
	d, err := c.Load("README.md")
	if err != nil {
		t.Fatal(err)
	}
	n, errs := c.Links(d)
	if n != 16 {
		t.Errorf("checked %d relative links, want 16", n)
	}
	var got []string
	for _, err := range errs {
		got = append(got, err.Error())
	}
	for _, want := range []string{
		`link "docs/nope.md": no file docs/nope.md`,
		`link "docs/b.md#exit-code": docs/b.md has no heading #exit-code (did you mean #exit-codes?)`,
		`link "#there": README.md has no heading #there`,
		`link "../shared/DESIGN.md" leaves the repository`,
		`link "docs/missing.png": no file docs/missing.png`,
		`link "main.go#main": #main on main.go, which has no headings`,
		`link "docs/gone.png": no file docs/gone.png`,
	} {
		if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("no error %q among:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if len(got) != 7 {
		t.Errorf("%d errors, want 7:\n%s", len(got), strings.Join(got, "\n"))
	}
}

// TestCommandsFail: command lines in every form the docs write them are
// found, and a made-up flag, a renamed subcommand, a group or a wrong
// argument count fails against the real trees.
func TestCommandsFail(t *testing.T) {
	src := "```sh\n" +
		"# a comment: producer --nope is not a command\n" +
		"bin/producer submit /tmp/b --target cpu \\\n" +
		"    --candidates ort:cpu:basic --wait            # line 3\n" +
		"export TUNEFLEET_REDIS=redis://r:6379/0 && bin/worker run --queues cpu --concurrency 2\n" +
		"TUNEFLEET_WEB_TOKEN=$(openssl rand -hex 16) bin/producer serve --listen 0.0.0.0:8080 --write\n" +
		"bin/producer status RUN -o json | jq .status; ./bin/worker info --made-up-flag\n" +
		"bin/producer bundle from-onx m.onnx -o out\n" +
		"bin/worker tune\n" +
		"bin/producer cancel RUN1 RUN2\n" +
		"```\n\n" +
		"```console\n$ producer fetch m --platform cpu -o d --colour\nproducer --this-is-output\n```\n\n" +
		"```\nrun x: done\nbin/producer fetch m --platform cpu --store file://s -o d\n```\n\n" +
		"```\nproducer submit ─► jobs.Client ─► store (by digest)\nworker ─► jobs handler ─► runstate\n```\n\n" +
		"```python\nsubprocess.run(['producer', '--nope'])\n```\n\n" +
		"See `producer status RUN [--watch [--timeout 1h]] [-o json]` and `worker run --retry-budjet`.\n"
	c := &doccheck.Checker{Trees: trees}
	cmds, errs := c.Commands(doccheck.Parse("t.md", []byte(src)))
	for _, err := range errs {
		t.Error(err)
	}
	type res struct {
		line int
		err  string
	}
	var got []res
	for _, cmd := range cmds {
		r := res{line: cmd.Line}
		if err := c.Check(cmd); err != nil {
			r.err = err.Error()
		}
		got = append(got, r)
	}
	want := []res{
		{3, ""},
		{5, ""},
		{6, ""},
		{7, ""},
		{7, "unknown flag: --made-up-flag"},
		{8, `unknown command "from-onx" for "producer bundle"`},
		{9, "arg(s)"},
		{10, "accepts 1 arg(s), received 2"},
		{14, "unknown flag: --colour"},
		{20, ""},
		{32, ""},
		{32, "unknown flag: --retry-budjet"},
	}
	if len(got) != len(want) {
		t.Fatalf("found %d command lines, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].line != want[i].line || (want[i].err == "") != (got[i].err == "") || !strings.Contains(got[i].err, want[i].err) {
			t.Errorf("command %d: line %d, error %q; want line %d, error containing %q", i, got[i].line, got[i].err, want[i].line, want[i].err)
		}
	}
}

func TestMakeTargets(t *testing.T) {
	mf := []byte("SHELL := /bin/bash\nX ?= 1\n.PHONY: all test lint\nall: build\nbuild: ort\n\tgo build\n$(ORT_LIB):\n\tnpm pack\ndemo-bundle: build\nfuzz bench: x\n")
	got := doccheck.ReadMakeTargets(mf)
	for _, want := range []string{"all", "test", "lint", "build", "demo-bundle", "fuzz", "bench"} {
		if !got[want] {
			t.Errorf("target %q not found in %v", want, got)
		}
	}
	for _, not := range []string{"SHELL", "X", "$(ORT_LIB)", ".PHONY", "go"} {
		if got[not] {
			t.Errorf("%q taken for a target", not)
		}
	}
	c := &doccheck.Checker{Trees: trees, MakeTargets: got}
	src := "```sh\nmake build lint FUZZTIME=12s -j2\nmake tset\n```\n\nRun `make lint && go test ./...` or `make -C sub demo`.\n"
	cmds, errs := c.Commands(doccheck.Parse("m.md", []byte(src)))
	for _, err := range errs {
		t.Error(err)
	}
	var bad []string
	for _, cmd := range cmds {
		if err := c.Check(cmd); err != nil {
			bad = append(bad, err.Error())
		}
	}
	if len(cmds) != 4 || len(bad) != 2 || !strings.Contains(bad[0], `no target "tset"`) || !strings.Contains(bad[1], `no target "demo"`) {
		t.Errorf("%d make lines, errors %q; want 4 lines and errors for tset and demo", len(cmds), bad)
	}
}
