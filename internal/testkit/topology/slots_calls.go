package topology

import (
	"fmt"
	"go/ast"
	"go/token"
	"strings"
)

// The Go side of the slot check: the call sites (script runs, Eval,
// multi-key commands, transactions and WATCH) and the keys they pass.

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
	methodCalls(body, func(call *ast.CallExpr, sel *ast.SelectorExpr) {
		// A Redis command's first argument is a context (ctxArg): that
		// tells rdb.Del(ctx, k) from w.Header().Del(k), os.Rename(a, b).
		recv, _ := sel.X.(*ast.Ident)
		m := sel.Sel.Name
		switch {
		case recv != nil && isScriptVar(p.scripts, recv.Name) && (m == "Run" || m == "RunRO" || m == "Eval" || m == "EvalSha" || m == "EvalRO" || m == "EvalShaRO"):
			p.rep.Sites["script call"]++
			if len(call.Args) < 3 {
				return
			}
			keys, ok := p.keyList(call.Args[2], locals)
			if !ok {
				p.problem(call.Pos(), "%s.%s: cannot read its keys (%s)", recv.Name, m, p.src(call.Args[2]))
				return
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
				return
			}
			p.sameSlot(call.Pos(), m, keys)
		case m == "TxPipelined" && len(call.Args) == 2:
			p.rep.Sites["transaction"]++
			if v, fb, ok := txFunc(call.Args[1]); ok {
				p.transaction(call.Pos(), v, fb, locals)
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
					return
				}
				keys = append(keys, k)
			}
			if v, fb, ok := txFunc(call.Args[1]); ok {
				keys = append(keys, p.txKeys(v, fb, locals)...)
			}
			p.sameSlot(call.Pos(), "Watch", keys)
		case m == "MSet" || m == "MSetNX":
			if !ctxArg(call) {
				return
			}
			p.rep.Sites["multi-key"]++
			var keys []keyVal
			for i := 1; i < len(call.Args); i += 2 {
				k, ok := p.key(call.Args[i], locals)
				if !ok {
					p.problem(call.Pos(), "%s: cannot read key %s", m, p.src(call.Args[i]))
					return
				}
				keys = append(keys, k)
			}
			p.sameSlot(call.Pos(), m, keys)
		default:
			span, ok := multiKey[m]
			if !ok || !ctxArg(call) || len(call.Args) <= span[0] {
				return
			}
			args, toEnd := spanArgs(call, span)
			var keys []keyVal
			if call.Ellipsis.IsValid() && toEnd {
				// Keys spread from a slice: rdb.Del(ctx, runKeys(run)...).
				spread, ok := p.keyList(args[len(args)-1], locals)
				if !ok {
					p.rep.Sites["multi-key"]++
					p.problem(call.Pos(), "%s(%s...): cannot read the keys of the slice", m, p.src(args[len(args)-1]))
					return
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
				return // one key: one slot
			}
			p.rep.Sites["multi-key"]++
			p.sameSlot(call.Pos(), m, keys)
		}
	})
}

// methodCalls calls fn with every method call (X.M(…)) in body.
func methodCalls(body ast.Node, fn func(call *ast.CallExpr, sel *ast.SelectorExpr)) {
	ast.Inspect(body, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
				fn(call, sel)
			}
		}
		return true
	})
}

// txFunc is the parameter and body of a transaction's function literal
// (rdb.TxPipelined(ctx, func(pipe) error {…}), rdb.Watch(ctx, func(tx)
// error {…}, keys…)), when arg is one with a single named parameter.
func txFunc(arg ast.Expr) (string, *ast.BlockStmt, bool) {
	fl, ok := arg.(*ast.FuncLit)
	if !ok || len(fl.Type.Params.List) != 1 || len(fl.Type.Params.List[0].Names) != 1 {
		return "", nil, false
	}
	return fl.Type.Params.List[0].Names[0].Name, fl.Body, true
}

// spanArgs are the key arguments of a call to a multi-key command whose
// keys are span (multiKey) and whether they run to the call's end.
func spanArgs(call *ast.CallExpr, span [2]int) ([]ast.Expr, bool) {
	end := span[1]
	if end == -1 || end > len(call.Args) {
		end = len(call.Args)
	}
	return call.Args[span[0]:end], end == len(call.Args)
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
	methodCalls(body, func(call *ast.CallExpr, sel *ast.SelectorExpr) {
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != v || !ctxArg(call) || len(call.Args) < 2 {
			return
		}
		args := call.Args[1:2]
		if span, ok := multiKey[sel.Sel.Name]; ok {
			args, _ = spanArgs(call, span)
		}
		for _, a := range args {
			k, ok := p.key(a, locals)
			if !ok {
				k = keyVal{unknown: p.src(a)}
			}
			keys = append(keys, k)
		}
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
