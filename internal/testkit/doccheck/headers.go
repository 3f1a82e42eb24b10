package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
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
// A header printed another way (Fprintf, a built string) is not read.
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
		file, err := parser.ParseFile(fset, f, nil, 0)
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
			if err != nil {
				return true
			}
			s = strings.TrimRight(s, "\t") // a trailing tab pads, it adds no column
			if !strings.Contains(s, "\t") {
				return true
			}
			cols := strings.Split(s, "\t")
			if !upper(cols) {
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

// StaleHeaders returns the lines of d's code blocks that look like a
// header of one of headers (every column upper case, the first the same
// as one header's first: GRAPH, RUN …) but are none of them exactly: a
// table's header as some earlier version printed it, a column added,
// dropped or renamed anywhere. It also returns how many header lines it
// found, stale or not.
func StaleHeaders(d *Doc, headers [][]string) (stale []Span, shown int) {
	first := map[string]bool{}
	for _, h := range headers {
		first[h[0]] = true
	}
	for _, b := range d.Blocks {
		for i, line := range strings.Split(b.Text, "\n") {
			cols := padding.Split(strings.TrimSpace(line), -1)
			if len(cols) < 2 || !first[cols[0]] || !upper(cols) {
				continue
			}
			shown++
			if !slices.ContainsFunc(headers, func(h []string) bool { return slices.Equal(cols, h) }) {
				stale = append(stale, Span{Text: strings.TrimSpace(line), Line: b.Line + i})
			}
		}
	}
	return stale, shown
}

// upper says whether every column is upper case with a letter in it, as
// a header's are and a row of data's are not.
func upper(cols []string) bool {
	return !slices.ContainsFunc(cols, func(c string) bool {
		return c == "" || strings.ToUpper(c) != c || !strings.ContainsFunc(c, unicode.IsLetter)
	})
}
