package topology

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
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

// collect finds constants, key functions and scripts.
func (p *pkgCheck) collect() {
	for _, f := range p.files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					p.funcs[d.Name.Name] = d
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					vs, ok := s.(*ast.ValueSpec)
					if !ok {
						continue
					}
					for i, n := range vs.Names {
						if i >= len(vs.Values) {
							continue
						}
						v := vs.Values[i]
						if d.Tok == token.CONST {
							p.consts[n.Name] = v
						}
						if call, ok := v.(*ast.CallExpr); ok && isSel(call.Fun, "redis", "NewScript") && len(call.Args) == 1 {
							p.rep.Sites["script"]++
							src, ok := p.stringValue(call.Args[0])
							if !ok {
								p.problem(call.Pos(), "script %s: its source is not a constant string, so its keys cannot be checked", n.Name)
								continue
							}
							p.scripts[n.Name] = p.checkLua(call.Pos(), n.Name, src)
						}
					}
				}
			}
		}
	}
}

var (
	luaCall     = regexp.MustCompile(`redis\.p?call\(\s*['"]([A-Za-z]+)['"]\s*(?:,\s*([^,)]+))?`)
	luaKeysIdx  = regexp.MustCompile(`KEYS\[(\d+)\]`)
	luaKeyArg   = regexp.MustCompile(`^KEYS\[\d+\]$`)
	luaKeysLoop = regexp.MustCompile(`for\s+\w+\s*,\s*(\w+)\s+in\s+ipairs\(\s*KEYS\s*\)`)
	luaKeysVar  = regexp.MustCompile(`local\s+(\w+)\s*=\s*KEYS\[\d+\]`)
)

// keylessLua are commands whose first argument is not a key.
var keylessLua = map[string]bool{"TIME": true, "PING": true, "ECHO": true, "PUBLISH": true, "SCRIPT": true, "INFO": true}

// checkLua wants every redis.call's key to come from KEYS, and returns
// the highest KEYS index the script reads.
func (p *pkgCheck) checkLua(pos token.Pos, name, src string) int {
	bound := map[string]bool{}
	for _, m := range luaKeysLoop.FindAllStringSubmatch(src, -1) {
		bound[m[1]] = true
	}
	for _, m := range luaKeysVar.FindAllStringSubmatch(src, -1) {
		bound[m[1]] = true
	}
	for _, m := range luaCall.FindAllStringSubmatch(src, -1) {
		cmd, arg := strings.ToUpper(m[1]), strings.TrimSpace(m[2])
		if keylessLua[cmd] || arg == "" {
			continue
		}
		if !luaKeyArg.MatchString(arg) && !bound[arg] {
			p.problem(pos, "script %s: redis.call('%s', %s): a script may only touch the keys it is given in KEYS (a cluster routes it by them); pass this key in KEYS", name, m[1], arg)
		}
	}
	hi := 0
	for _, m := range luaKeysIdx.FindAllStringSubmatch(src, -1) {
		if n, _ := strconv.Atoi(m[1]); n > hi {
			hi = n
		}
	}
	return hi
}

// multiKey maps a multi-key command (go-redis method name) to the
// arguments that are keys: from index first to the end (last == -1),
// or [first, last).
var multiKey = map[string][2]int{
	"MGet": {1, -1}, "Del": {1, -1}, "Unlink": {1, -1}, "Exists": {1, -1}, "Touch": {1, -1},
	"SUnion": {1, -1}, "SInter": {1, -1}, "SDiff": {1, -1}, "SUnionStore": {1, -1}, "SInterStore": {1, -1}, "SDiffStore": {1, -1},
	"PFMerge": {1, -1}, "PFCount": {1, -1}, "SInterCard": {2, -1},
	"Rename": {1, 3}, "RenameNX": {1, 3}, "RPopLPush": {1, 3}, "BRPopLPush": {1, 3}, "LMove": {1, 3}, "BLMove": {1, 3},
	"SMove": {1, 3}, "Copy": {1, 3}, "ZUnionStore": {1, 2}, "ZInterStore": {1, 2}, "ZDiffStore": {1, -1}, "ZRangeStore": {1, 2},
	"BLPop": {2, -1}, "BRPop": {2, -1},
}

// checkFunc checks the sites in one function body.
func (p *pkgCheck) checkFunc(body *ast.BlockStmt) {
	locals := assignedOnce(body)
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		// A Redis command's first argument is a context (ctxArg): that
		// tells rdb.Del(ctx, k) from w.Header().Del(k), os.Rename(a, b).
		recv, _ := sel.X.(*ast.Ident)
		m := sel.Sel.Name
		switch {
		case recv != nil && isScriptVar(p.scripts, recv.Name) && (m == "Run" || m == "RunRO" || m == "Eval" || m == "EvalSha" || m == "EvalRO" || m == "EvalShaRO"):
			p.rep.Sites["script call"]++
			if len(call.Args) < 3 {
				return true
			}
			keys, ok := p.keyList(call.Args[2], locals)
			if !ok {
				p.problem(call.Pos(), "%s.%s: cannot read its keys (%s)", recv.Name, m, p.src(call.Args[2]))
				return true
			}
			if want := p.scripts[recv.Name]; len(keys) < want {
				p.problem(call.Pos(), "%s.%s passes %d key(s) but the script reads KEYS[%d]: a key it touches is undeclared", recv.Name, m, len(keys), want)
			}
			p.sameSlot(call.Pos(), fmt.Sprintf("%s.%s", recv.Name, m), keys)
		case (m == "Eval" || m == "EvalSha" || m == "EvalRO" || m == "EvalShaRO") && len(call.Args) >= 3 && ctxArg(call):
			p.rep.Sites["script call"]++
			keys, ok := p.keyList(call.Args[2], locals)
			if !ok {
				p.problem(call.Pos(), "%s: cannot read its keys (%s)", m, p.src(call.Args[2]))
				return true
			}
			p.sameSlot(call.Pos(), m, keys)
		case m == "TxPipelined" && len(call.Args) == 2:
			p.rep.Sites["transaction"]++
			if fl, ok := call.Args[1].(*ast.FuncLit); ok && len(fl.Type.Params.List) == 1 && len(fl.Type.Params.List[0].Names) == 1 {
				p.transaction(call.Pos(), fl.Type.Params.List[0].Names[0].Name, fl.Body, locals)
			} else {
				p.problem(call.Pos(), "TxPipelined: cannot read the transaction (not a func literal)")
			}
		case m == "TxPipeline" && len(call.Args) == 0:
			p.rep.Sites["transaction"]++
			if v := txVar(body, call); v != "" {
				p.transaction(call.Pos(), v, body, locals)
			} else {
				p.problem(call.Pos(), "TxPipeline: cannot tell which variable holds the transaction")
			}
		case m == "Watch" && len(call.Args) >= 3 && ctxArg(call):
			p.rep.Sites["transaction"]++
			var keys []keyVal
			for _, a := range call.Args[2:] {
				k, ok := p.key(a, locals)
				if !ok {
					p.problem(a.Pos(), "Watch: cannot read key %s", p.src(a))
					return true
				}
				keys = append(keys, k)
			}
			if fl, ok := call.Args[1].(*ast.FuncLit); ok && len(fl.Type.Params.List) == 1 && len(fl.Type.Params.List[0].Names) == 1 {
				keys = append(keys, p.txKeys(fl.Type.Params.List[0].Names[0].Name, fl.Body, locals)...)
			}
			p.sameSlot(call.Pos(), "Watch", keys)
		case m == "MSet" || m == "MSetNX":
			if !ctxArg(call) {
				return true
			}
			p.rep.Sites["multi-key"]++
			var keys []keyVal
			for i := 1; i < len(call.Args); i += 2 {
				k, ok := p.key(call.Args[i], locals)
				if !ok {
					p.problem(call.Pos(), "%s: cannot read key %s", m, p.src(call.Args[i]))
					return true
				}
				keys = append(keys, k)
			}
			p.sameSlot(call.Pos(), m, keys)
		default:
			span, ok := multiKey[m]
			if !ok || !ctxArg(call) || len(call.Args) <= span[0] {
				return true
			}
			end := span[1]
			if end == -1 || end > len(call.Args) {
				end = len(call.Args)
			}
			args := call.Args[span[0]:end]
			var keys []keyVal
			if call.Ellipsis.IsValid() && end == len(call.Args) {
				// Keys spread from a slice: rdb.Del(ctx, runKeys(run)...).
				spread, ok := p.keyList(args[len(args)-1], locals)
				if !ok {
					p.rep.Sites["multi-key"]++
					p.problem(call.Pos(), "%s(%s...): cannot read the keys of the slice", m, p.src(args[len(args)-1]))
					return true
				}
				keys, args = spread, args[:len(args)-1]
			}
			for _, a := range args {
				k, ok := p.key(a, locals)
				if !ok {
					k = keyVal{unknown: p.src(a)}
				}
				keys = append(keys, k)
			}
			if len(keys) < 2 {
				return true // one key: one slot
			}
			p.rep.Sites["multi-key"]++
			p.sameSlot(call.Pos(), m, keys)
		}
		return true
	})
}

func isScriptVar(scripts map[string]int, name string) bool { _, ok := scripts[name]; return ok }

// ctxArg: a Redis command's first argument is a context.
func ctxArg(call *ast.CallExpr) bool {
	if len(call.Args) == 0 {
		return false
	}
	switch a := call.Args[0].(type) {
	case *ast.Ident:
		return strings.Contains(strings.ToLower(a.Name), "ctx")
	case *ast.CallExpr:
		if s, ok := a.Fun.(*ast.SelectorExpr); ok {
			if x, ok := s.X.(*ast.Ident); ok && x.Name == "context" {
				return true
			}
			return s.Sel.Name == "Context"
		}
	}
	return false
}

// transaction checks that every key a MULTI/EXEC (commands called on
// variable v in body) names shares one slot.
func (p *pkgCheck) transaction(pos token.Pos, v string, body *ast.BlockStmt, locals map[string]ast.Expr) {
	p.sameSlot(pos, "transaction", p.txKeys(v, body, locals))
}

// txKeys are the keys of the commands called on v in body: each command's
// first key, and every key of a multi-key command.
func (p *pkgCheck) txKeys(v string, body *ast.BlockStmt, locals map[string]ast.Expr) []keyVal {
	var keys []keyVal
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != v || !ctxArg(call) || len(call.Args) < 2 {
			return true
		}
		args := call.Args[1:2]
		if span, ok := multiKey[sel.Sel.Name]; ok {
			end := span[1]
			if end == -1 || end > len(call.Args) {
				end = len(call.Args)
			}
			args = call.Args[span[0]:end]
		}
		for _, a := range args {
			k, ok := p.key(a, locals)
			if !ok {
				k = keyVal{unknown: p.src(a)}
			}
			keys = append(keys, k)
		}
		return true
	})
	return keys
}

// txVar finds `v := X.TxPipeline()` for call in body.
func txVar(body *ast.BlockStmt, call *ast.CallExpr) string {
	v := ""
	ast.Inspect(body, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == 1 && len(as.Rhs) == 1 && as.Rhs[0] == ast.Expr(call) {
			if id, ok := as.Lhs[0].(*ast.Ident); ok {
				v = id.Name
			}
		}
		return v == ""
	})
	return v
}

// keyVal is a key evaluated symbolically: text with every unknown part
// written as \x00EXPR\x00; unknown is set when it could not be evaluated.
type keyVal struct {
	text    string
	unknown string
}

// slot is what decides the key's slot: its hash tag, or the whole key.
func (k keyVal) slot() string {
	if i := strings.IndexByte(k.text, '{'); i >= 0 {
		if j := strings.IndexByte(k.text[i+1:], '}'); j > 0 {
			return "{" + k.text[i+1:i+1+j] + "}"
		}
	}
	return k.text
}

func (k keyVal) String() string { return strings.ReplaceAll(k.text, "\x00", "`") }

// sameSlot wants every key to hash to the same slot.
func (p *pkgCheck) sameSlot(pos token.Pos, what string, keys []keyVal) {
	if len(keys) < 2 {
		return
	}
	for _, k := range keys {
		if k.unknown != "" {
			p.problem(pos, "%s: cannot read key %s, so cannot tell its slot", what, k.unknown)
			return
		}
	}
	first := keys[0].slot()
	for _, k := range keys[1:] {
		if k.slot() != first {
			names := make([]string, len(keys))
			for i, k := range keys {
				names[i] = k.String()
			}
			p.problem(pos, "%s: keys %s may fall in different cluster slots (CROSSSLOT): give them one hash tag, e.g. {run}", what, strings.Join(names, ", "))
			return
		}
	}
}

// keyList evaluates a []string of keys: a composite literal, a call of a
// key-list function, or a local assigned once.
func (p *pkgCheck) keyList(e ast.Expr, locals map[string]ast.Expr) ([]keyVal, bool) {
	return p.keyListDepth(e, locals, nil, 0)
}

func (p *pkgCheck) keyListDepth(e ast.Expr, locals map[string]ast.Expr, env map[string]string, depth int) ([]keyVal, bool) {
	if depth > 8 {
		return nil, false
	}
	switch e := e.(type) {
	case *ast.CompositeLit:
		var out []keyVal
		for _, el := range e.Elts {
			k, ok := p.eval(el, locals, env, depth+1)
			if !ok {
				return nil, false
			}
			out = append(out, keyVal{text: k})
		}
		return out, true
	case *ast.Ident:
		if x, ok := locals[e.Name]; ok {
			return p.keyListDepth(x, nil, env, depth+1)
		}
	case *ast.CallExpr:
		if fn, args, ok := p.keyFunc(e, locals, env, depth); ok {
			if ret := singleReturn(fn); ret != nil {
				return p.keyListDepth(ret, nil, args, depth+1)
			}
		}
	}
	return nil, false
}

// key evaluates one key expression.
func (p *pkgCheck) key(e ast.Expr, locals map[string]ast.Expr) (keyVal, bool) {
	s, ok := p.eval(e, locals, nil, 0)
	return keyVal{text: s}, ok
}

// eval evaluates a string expression: literals, constants, +, key
// functions with bound arguments, locals assigned once; any other
// expression (a parameter, a field) is an unknown written \x00EXPR\x00.
func (p *pkgCheck) eval(e ast.Expr, locals map[string]ast.Expr, env map[string]string, depth int) (string, bool) {
	if depth > 8 {
		return "", false
	}
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		}
	case *ast.ParenExpr:
		return p.eval(e.X, locals, env, depth+1)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			a, ok1 := p.eval(e.X, locals, env, depth+1)
			b, ok2 := p.eval(e.Y, locals, env, depth+1)
			return a + b, ok1 && ok2
		}
	case *ast.Ident:
		if v, ok := env[e.Name]; ok {
			return v, true
		}
		if x, ok := locals[e.Name]; ok {
			return p.eval(x, nil, env, depth+1)
		}
		if c, ok := p.consts[e.Name]; ok {
			return p.eval(c, nil, nil, depth+1)
		}
		return "\x00" + e.Name + "\x00", true
	case *ast.CallExpr:
		if fn, args, ok := p.keyFunc(e, locals, env, depth); ok {
			if ret := singleReturn(fn); ret != nil {
				return p.eval(ret, nil, args, depth+1)
			}
		}
		return "", false
	case *ast.SelectorExpr, *ast.IndexExpr:
		return "\x00" + p.src(e) + "\x00", true
	}
	return "", false
}

// keyFunc resolves a call of a package function and binds its parameters
// to the arguments' values.
func (p *pkgCheck) keyFunc(call *ast.CallExpr, locals map[string]ast.Expr, env map[string]string, depth int) (*ast.FuncDecl, map[string]string, bool) {
	id, ok := call.Fun.(*ast.Ident)
	if !ok {
		return nil, nil, false
	}
	fn, ok := p.funcs[id.Name]
	if !ok {
		return nil, nil, false
	}
	var params []string
	for _, f := range fn.Type.Params.List {
		for _, n := range f.Names {
			params = append(params, n.Name)
		}
	}
	if len(params) != len(call.Args) {
		return nil, nil, false
	}
	args := map[string]string{}
	for i, a := range call.Args {
		v, ok := p.eval(a, locals, env, depth+1)
		if !ok {
			return nil, nil, false
		}
		args[params[i]] = v
	}
	return fn, args, true
}

// singleReturn is the expression of a function whose body is one return
// of one value.
func singleReturn(fn *ast.FuncDecl) ast.Expr {
	if fn.Body == nil || len(fn.Body.List) != 1 {
		return nil
	}
	r, ok := fn.Body.List[0].(*ast.ReturnStmt)
	if !ok || len(r.Results) != 1 {
		return nil
	}
	return r.Results[0]
}

// assignedOnce maps the locals of body assigned exactly once (v := expr,
// var v = expr) to their expression.
func assignedOnce(body *ast.BlockStmt) map[string]ast.Expr {
	count := map[string]int{}
	val := map[string]ast.Expr{}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if id, ok := l.(*ast.Ident); ok {
					count[id.Name]++
					if len(n.Lhs) == len(n.Rhs) {
						val[id.Name] = n.Rhs[i]
					}
				}
			}
		case *ast.ValueSpec:
			for i, id := range n.Names {
				count[id.Name]++
				if i < len(n.Values) {
					val[id.Name] = n.Values[i]
				}
			}
		}
		return true
	})
	out := map[string]ast.Expr{}
	for k, v := range val {
		if count[k] == 1 {
			out[k] = v
		}
	}
	return out
}

func (p *pkgCheck) stringValue(e ast.Expr) (string, bool) {
	s, ok := p.eval(e, nil, nil, 0)
	return s, ok && !strings.Contains(s, "\x00")
}

func (p *pkgCheck) src(e ast.Expr) string { return types.ExprString(e) }

func isSel(e ast.Expr, pkg, name string) bool {
	s, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := s.X.(*ast.Ident)
	return ok && x.Name == pkg && s.Sel.Name == name
}
