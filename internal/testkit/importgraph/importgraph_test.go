package importgraph

import (
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

const mod = "github.com/tunefleet/tunefleet"

// rule: no package matched by roots may pull in (or, direct, import
// itself) a package matched by one of forbid and not named in allow. A
// forbid entry ending in "/" is a path prefix; any other names a package
// and those below it. An allow entry names one package exactly: what it
// pulls in is still checked.
type rule struct {
	name   string
	roots  []string
	direct bool
	forbid []string
	allow  []string
	why    string
}

var rules = []rule{
	{
		name:   "what ships links no test harness",
		roots:  []string{"./cmd/..."},
		forbid: []string{mod + "/internal/testkit"},
		why:    "internal/testkit holds test harnesses and suites; nothing there ships",
	},
	{
		name:   "the queue and the tuner pull in no metrics, web or tests",
		roots:  []string{"./jobs", "./tuner", "./runstate", "./resultindex"},
		forbid: []string{"github.com/prometheus/", mod + "/web", mod + "/metrics", mod + "/internal/testkit"},
		why:    "metrics see the queue through jobs.Observer; the web UI reads what the queue records",
	},
	{
		name:   "run bookkeeping sits below the queue",
		roots:  []string{"./runstate"},
		forbid: []string{mod + "/jobs", "github.com/hibiken/asynq"},
		why:    "jobs builds on runstate; asynq is jobs' (it shares runstate's Redis through Runs.Client)",
	},
	{
		name:   "run bookkeeping knows no store or backend",
		roots:  []string{"./runstate"},
		direct: true,
		forbid: []string{mod + "/artifacts", mod + "/backend", mod + "/tuner", mod + "/trt", mod + "/ort"},
		why:    "jobs reads the store and hands runstate what it found (Runs.Restore)",
	},
	{
		name:   "the night's plan is arithmetic",
		roots:  []string{"./nightplan"},
		forbid: []string{mod + "/"},
		allow:  []string{mod + "/noise", mod + "/internal/human", mod + "/internal/clip"},
		why:    "nightplan is pure (estimate, order, finish); fleet reads the history and the registry and hands it numbers; noise, human and clip are pure too",
	},
	{
		name:   "the noise rule is arithmetic",
		roots:  []string{"./noise"},
		forbid: []string{mod + "/"},
		why:    "strategies, history and every display share noise's rule; it must not depend on any of them",
	},
	{
		name:   "the result index talks no Redis",
		roots:  []string{"./resultindex"},
		forbid: []string{"github.com/redis/", "github.com/hibiken/asynq", mod + "/jobs", mod + "/runstate"},
		why:    "the index and the negative cache live in the store",
	},
}

func forbidden(pkg string, forbid, allow []string) bool {
	if slices.Contains(allow, pkg) {
		return false
	}
	for _, f := range forbid {
		if strings.HasSuffix(f, "/") && strings.HasPrefix(pkg, f) || pkg == f || strings.HasPrefix(pkg, f+"/") {
			return true
		}
	}
	return false
}

// goList runs `go list` in the module's root and returns its stdout.
func goList(args ...string) (string, error) {
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m: %v", err)
	}
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = strings.TrimSpace(string(root))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// moduleGraph is the import graph of every package of the module and all
// they pull in (not their tests), read once with one `go list -deps`.
type moduleGraph struct {
	imports map[string][]string
	// expand is what go list made of each pattern the rules name.
	expand map[string][]string
}

var loaded struct {
	sync.Once
	g   moduleGraph
	err error
}

func load(t *testing.T) moduleGraph {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool on PATH")
	}
	loaded.Do(func() {
		g := moduleGraph{imports: map[string][]string{}, expand: map[string][]string{}}
		out, err := goList("-e", "-deps", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}", "./...")
		if err != nil {
			loaded.err = err
			return
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			pkg, imps, _ := strings.Cut(line, "\t")
			g.imports[pkg] = strings.Fields(imps)
		}
		var patterns []string
		for _, r := range rules {
			for _, p := range r.roots {
				if _, ok := g.expand[p]; !ok {
					g.expand[p] = nil
					patterns = append(patterns, p)
				}
			}
		}
		out, err = goList(append([]string{"-e", "-f", "{{.ImportPath}}"}, patterns...)...)
		if err != nil {
			loaded.err = err
			return
		}
		for _, pkg := range strings.Fields(out) {
			for _, p := range patterns {
				if matches(p, pkg) {
					g.expand[p] = append(g.expand[p], pkg)
				}
			}
		}
		loaded.g = g
	})
	if loaded.err != nil {
		t.Fatal(loaded.err)
	}
	return loaded.g
}

// matches reports whether a go list pattern of the rules ("./x" or
// "./x/...") names pkg.
func matches(pattern, pkg string) bool {
	rel := strings.TrimPrefix(pattern, ".")
	if base, ok := strings.CutSuffix(rel, "/..."); ok {
		return pkg == mod+base || strings.HasPrefix(pkg, mod+base+"/")
	}
	return pkg == mod+rel
}

// chain is a shortest import path from root to a forbidden package, nil
// when none is reachable (or, direct, imported by root itself).
func chain(imports map[string][]string, root string, forbid, allow []string, direct bool) []string {
	if direct {
		for _, imp := range imports[root] {
			if forbidden(imp, forbid, allow) {
				return []string{root, imp}
			}
		}
		return nil
	}
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p != root && forbidden(p, forbid, allow) {
			var path []string
			for ; p != ""; p = prev[p] {
				path = append(path, p)
			}
			slices.Reverse(path)
			return path
		}
		for _, imp := range imports[p] {
			if _, seen := prev[imp]; !seen {
				prev[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

func TestImportGraph(t *testing.T) {
	g := load(t)
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			var roots []string
			for _, p := range r.roots {
				if len(g.expand[p]) == 0 {
					t.Fatalf("%s matches no package", p)
				}
				roots = append(roots, g.expand[p]...)
			}
			for _, root := range roots {
				if _, ok := g.imports[root]; !ok {
					t.Fatalf("go list -deps did not list the root %s", root)
				}
				if path := chain(g.imports, root, r.forbid, r.allow, r.direct); path != nil {
					t.Errorf("%s pulls in %s:\n\t%s\n(%s)", root, path[len(path)-1], strings.Join(path, "\n\t→ "), r.why)
				}
			}
		})
	}
}

// The graph the rules read is the real one: jobs reaches runstate and
// resultindex, and the CLI reaches Prometheus (through metrics), so a
// rule that passes does so because the imports are absent, not unseen.
func TestImportGraphSeesTheImports(t *testing.T) {
	g := load(t)
	for _, c := range []struct{ root, reaches string }{
		{mod + "/jobs", mod + "/runstate"},
		{mod + "/jobs", mod + "/resultindex"},
		{mod + "/jobs", "github.com/hibiken/asynq"},
		{mod + "/internal/cli", "github.com/prometheus/"},
		{mod + "/internal/cli", mod + "/web"},
	} {
		if chain(g.imports, c.root, []string{c.reaches}, nil, false) == nil {
			t.Errorf("%s does not reach %s in the graph go list gave: the rules would pass vacuously", c.root, c.reaches)
		}
	}
}

func TestForbidden(t *testing.T) {
	for _, c := range []struct {
		pkg  string
		want bool
	}{
		{mod + "/web", true},
		{mod + "/web/static", true},
		{mod + "/webhook", false},
		{"github.com/prometheus/client_golang/prometheus", true},
		{mod + "/internal/testkit/testsvc", true},
		{mod + "/internal/cli", false},
		{mod + "/internal/testkit/orttest", false},      // allowed
		{mod + "/internal/testkit/orttest/inner", true}, // allow names one package, not those below it
	} {
		if got := forbidden(c.pkg, []string{mod + "/web", "github.com/prometheus/", mod + "/internal/testkit"}, []string{mod + "/internal/testkit/orttest"}); got != c.want {
			t.Errorf("forbidden(%s) = %v, want %v", c.pkg, got, c.want)
		}
	}
}

// An allowed package is no way round a rule: what it pulls in is checked.
func TestAllowedPackageIsStillWalked(t *testing.T) {
	imports := map[string][]string{mod + "/nightplan": {mod + "/noise"}, mod + "/noise": {"math", mod + "/web"}}
	forbid, allow := []string{mod + "/"}, []string{mod + "/noise"}
	got := chain(imports, mod+"/nightplan", forbid, allow, false)
	if want := []string{mod + "/nightplan", mod + "/noise", mod + "/web"}; !slices.Equal(got, want) {
		t.Errorf("chain %v, want %v", got, want)
	}
	imports[mod+"/noise"] = []string{"math"}
	if got := chain(imports, mod+"/nightplan", forbid, allow, false); got != nil {
		t.Errorf("chain %v through a pure allowed package, want none", got)
	}
}
