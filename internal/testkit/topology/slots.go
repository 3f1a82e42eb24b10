package topology

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// On a Redis Cluster every key lives in one of 16,384 slots, chosen by a
// hash of the key, or of its hash tag (the part between the first "{" and
// the next "}") when it has one. A Lua script, a command naming several
// keys and a MULTI/EXEC transaction must keep to one slot, or the cluster
// answers CROSSSLOT; and a script may only touch the keys it was given in
// KEYS, or the cluster cannot route it at all. A single server accepts
// all of it, so nothing but a test on a cluster (or this check) sees it
// break.
//
// CheckSlots reads the module's Go source (not its tests) with go/ast and
// checks every such site:
//
//   - every redis.NewScript: each redis.call/pcall's key is a KEYS entry
//     (or a name bound to one), never a literal or a built name; and every
//     call of the script (Run, RunRO, Eval, EvalSha) passes keys that share
//     one hash tag, and at least as many as the script reads;
//   - rdb.Eval/EvalSha/EvalRO with keys;
//   - multi-key commands (MGet, MSet, Del and Unlink of several keys,
//     SUnionStore and the other *Store commands, Rename, RPopLPush, LMove,
//     SMove, PFMerge, Copy, Watch, …): their keys share one hash tag;
//   - TxPipelined and TxPipeline (MULTI/EXEC): every key the transaction
//     names shares one hash tag. (A plain Pipelined is split by slot by
//     go-redis's cluster client, and is left alone.)
//
// Keys are evaluated symbolically: string literals, constants, the
// package's key functions (a func whose body returns a string, or a
// []string of them, e.g. runKey(run)) with their arguments bound, and
// local variables assigned once. Two keys share a tag when their tags are
// the same text with the same expressions in place of the unknowns (the
// tag of runKey(run) and pendingKey(run) is {run}; of runKey(a) and
// runKey(b), two different ones). A key that cannot be evaluated at a
// site with several keys is a problem too: the check must not pass what
// it could not read.

// SlotReport is what CheckSlots found.
type SlotReport struct {
	Problems []string
	// Sites counts what was checked, by kind ("script", "script call",
	// "multi-key", "transaction"): a check that found nothing to check
	// proves nothing.
	Sites map[string]int
}

// CheckSlots checks every non-test Go file under root (skipping
// third_party, testdata, vendor, node_modules and hidden directories).
func CheckSlots(root string) (SlotReport, error) {
	byDir := map[string]map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if p != root && (n == "third_party" || n == "testdata" || n == "vendor" || n == "node_modules" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dir := filepath.Dir(p)
		if byDir[dir] == nil {
			byDir[dir] = map[string][]byte{}
		}
		rel, _ := filepath.Rel(root, p)
		byDir[dir][rel] = b
		return nil
	})
	if err != nil {
		return SlotReport{}, err
	}
	rep := SlotReport{Sites: map[string]int{}}
	dirs := make([]string, 0, len(byDir))
	for d := range byDir {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		r, err := CheckPackageSource(byDir[d])
		if err != nil {
			return rep, err
		}
		rep.Problems = append(rep.Problems, r.Problems...)
		for k, n := range r.Sites {
			rep.Sites[k] += n
		}
	}
	return rep, nil
}

// CheckPackageSource checks the files of one package (name → source).
func CheckPackageSource(files map[string][]byte) (SlotReport, error) {
	fset := token.NewFileSet()
	p := &pkgCheck{fset: fset, consts: map[string]ast.Expr{}, funcs: map[string]*ast.FuncDecl{}, scripts: map[string]int{},
		rep: SlotReport{Sites: map[string]int{}}}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f, err := parser.ParseFile(fset, n, files[n], parser.SkipObjectResolution)
		if err != nil {
			return p.rep, fmt.Errorf("parse %s: %w", n, err)
		}
		p.files = append(p.files, f)
	}
	p.collect()
	for _, f := range p.files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				p.checkFunc(fd.Body)
			}
		}
	}
	return p.rep, nil
}

type pkgCheck struct {
	fset   *token.FileSet
	files  []*ast.File
	consts map[string]ast.Expr
	funcs  map[string]*ast.FuncDecl
	// scripts maps a redis.NewScript variable to the highest KEYS index
	// its source reads.
	scripts map[string]int
	rep     SlotReport
}

func (p *pkgCheck) problem(pos token.Pos, format string, a ...any) {
	p.rep.Problems = append(p.rep.Problems, p.fset.Position(pos).String()+": "+fmt.Sprintf(format, a...))
}

// collect finds constants, key functions and scripts. Constants and
// functions come first, from every file: a script's source may be built
// from a constant declared after it, or in another file.
func (p *pkgCheck) collect() {
	p.eachValue(func(tok token.Token, n *ast.Ident, v ast.Expr) {
		if tok == token.CONST {
			p.consts[n.Name] = v
		}
	})
	for _, f := range p.files {
		for _, d := range f.Decls {
			if d, ok := d.(*ast.FuncDecl); ok && d.Recv == nil {
				p.funcs[d.Name.Name] = d
			}
		}
	}
	p.eachValue(func(_ token.Token, n *ast.Ident, v ast.Expr) {
		call, ok := v.(*ast.CallExpr)
		if !ok || !isSel(call.Fun, "redis", "NewScript") || len(call.Args) != 1 {
			return
		}
		p.rep.Sites["script"]++
		src, ok := p.stringValue(call.Args[0])
		if !ok {
			p.problem(call.Pos(), "script %s: its source is not a constant string, so its keys cannot be checked", n.Name)
			return
		}
		p.scripts[n.Name] = p.checkLua(call.Pos(), n.Name, src)
	})
}

// eachValue calls fn with each name given a value at package level.
func (p *pkgCheck) eachValue(fn func(tok token.Token, name *ast.Ident, value ast.Expr)) {
	for _, f := range p.files {
		for _, d := range f.Decls {
			d, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range d.Specs {
				vs, ok := s.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						fn(d.Tok, n, vs.Values[i])
					}
				}
			}
		}
	}
}
