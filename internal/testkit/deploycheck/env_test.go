package deploycheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestBinaryEnvIsWhatTheSourceReads scans the packages the binaries link
// (go list -deps ./cmd/...) for os.Getenv, os.LookupEnv and getenv calls
// and wants BinaryEnv to be exactly their names: a variable a manifest
// sets is checked against what the code really reads, and a variable the
// code starts reading must be added here.
func TestBinaryEnvIsWhatTheSourceReads(t *testing.T) {
	root := repoRoot(t)
	list := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}} {{.Dir}}{{end}}", "./cmd/...")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	read := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		imp, dir, _ := strings.Cut(line, " ")
		if !strings.HasPrefix(imp, "github.com/tunefleet/tunefleet") {
			continue
		}
		for _, n := range envReads(t, root, dir) {
			read[n] = true
		}
	}
	got := make([]string, 0, len(read))
	for n := range read {
		got = append(got, n)
	}
	sort.Strings(got)
	if !slices.Equal(got, BinaryEnv) {
		t.Errorf("the binaries read %q\nBinaryEnv lists %q: update BinaryEnv", got, BinaryEnv)
	}
}

// envReads returns the variable names one package's non-test files read.
// A name given by a constant is resolved within the package; any other
// expression fails the test, so that no read goes unseen.
func envReads(t *testing.T, root, dir string) []string {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	var calls []*ast.CallExpr
	for _, p := range pkgs {
		for _, f := range p.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.ValueSpec:
					for i, name := range n.Names {
						if i < len(n.Values) {
							if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								consts[name.Name], _ = strconv.Unquote(lit.Value)
							}
						}
					}
				case *ast.CallExpr:
					if isEnvRead(n.Fun) && len(n.Args) == 1 {
						calls = append(calls, n)
					}
				}
				return true
			})
		}
	}
	var names []string
	for _, c := range calls {
		if lit, ok := c.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			s, _ := strconv.Unquote(lit.Value)
			names = append(names, s)
			continue
		}
		if id, ok := c.Args[0].(*ast.Ident); ok {
			if v, ok := consts[id.Name]; ok {
				names = append(names, v)
				continue
			}
		}
		rel, _ := filepath.Rel(root, fset.Position(c.Pos()).Filename)
		t.Errorf("%s:%d: an environment read whose name is not a string constant of its package: name it with one", rel, fset.Position(c.Pos()).Line)
	}
	return names
}

func isEnvRead(fun ast.Expr) bool {
	switch f := fun.(type) {
	case *ast.SelectorExpr:
		x, ok := f.X.(*ast.Ident)
		return ok && x.Name == "os" && (f.Sel.Name == "Getenv" || f.Sel.Name == "LookupEnv")
	case *ast.Ident:
		return f.Name == "getenv"
	}
	return false
}
