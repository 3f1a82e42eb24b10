package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// TableHeaders reads the header rows that the Go files of dir (not its
// tests) print through a tabwriter: each string literal "A\tB\t…" given to
// fmt.Fprintln whose every column is upper case, split into its columns.
// A document that shows a command's table must show its header as the
// command prints it now (StaleHeaders): a column added to a table is
// otherwise missing from every example of it.
func TableHeaders(dir string) ([][]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var out [][]string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			return nil, fmt.Errorf("table headers: %w", err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Fprintln" {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "fmt" {
				return true
			}
			lit, ok := call.Args[1].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil || !strings.Contains(s, "\t") {
				return true
			}
			cols := strings.Split(s, "\t")
			if slices.ContainsFunc(cols, func(c string) bool {
				return c == "" || strings.ToUpper(c) != c || !strings.ContainsFunc(c, unicode.IsLetter)
			}) {
				return true
			}
			out = append(out, cols)
			return true
		})
	}
	return out, nil
}

// padding is what a tabwriter puts between columns: two spaces or more.
var padding = regexp.MustCompile(`\s{2,}`)

// StaleHeaders returns the lines of d's code blocks that begin like one of
// headers (the same first two columns) but are not it: a table's header
// as some earlier version printed it. It also returns how many lines it
// found that begin like a header, stale or not.
func StaleHeaders(d *Doc, headers [][]string) (stale []Span, shown int) {
	for _, b := range d.Blocks {
		for i, line := range strings.Split(b.Text, "\n") {
			cols := padding.Split(strings.TrimSpace(line), -1)
			if len(cols) < 2 {
				continue
			}
			for _, h := range headers {
				if len(h) < 2 || cols[0] != h[0] || cols[1] != h[1] {
					continue
				}
				shown++
				if !slices.Equal(cols, h) {
					stale = append(stale, Span{Text: strings.TrimSpace(line), Line: b.Line + i})
				}
				break
			}
		}
	}
	return stale, shown
}
