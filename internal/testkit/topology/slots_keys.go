package topology

import (
	"go/ast"
	"go/token"
	"go/types"
	"strconv"
	"strings"
)

// Keys evaluated symbolically (literals, constants, key functions with
// their arguments bound) and the slot their hash tag puts them in.

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
