package aitune

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/jsontree"
)

type locAt struct {
	loc   Locator
	where string
}

func tensorLocs(ts []TensorLocator) []locAt {
	out := make([]locAt, len(ts))
	for i, t := range ts {
		out[i] = locAt{t.Locator, t.where}
	}
	return out
}

func otherLocs(os []OtherValue) []locAt {
	out := make([]locAt, len(os))
	for i, o := range os {
		out[i] = locAt{o.Locator, fmt.Sprintf("other_inputs[%d]", i)}
	}
	return out
}

// conflicts reports two leaves at the same place, or a leaf inside
// another: a leaf is never a container, so one of them is wrong.
func (c *checker) conflicts(where string, locs []locAt) {
	for i := range locs {
		for j := i + 1; j < len(locs); j++ {
			a, b := locs[i], locs[j]
			switch {
			case a.loc.equal(b.loc):
				c.addf(where, "%s and %s have the same path %s", a.where, b.where, a.loc)
			case a.loc.isPrefixOf(b.loc) || b.loc.isPrefixOf(a.loc):
				c.addf(where, "the path of %s (%s) and of %s (%s) nest: a leaf cannot contain another", a.where, a.loc, b.where, b.loc)
			}
		}
	}
}

// tensors reads inputs or outputs: one entry per declared ONNX tensor,
// each named as AITune's naming contract names its path.
func (c *checker) tensors(n *jsontree.Node, graphWhere, field string, decls []bundle.TensorDecl, output bool, params []Parameter) []TensorLocator {
	path := graphWhere + "." + field
	kind := strings.TrimSuffix(field, "s")
	var out []TensorLocator
	named := map[string]bool{}
	for i, e := range must(n, field).Arr {
		where := fmt.Sprintf("%s[%d]", path, i)
		t := TensorLocator{Name: must(e, "name").Str, where: where}
		decl, declared := findDecl(decls, t.Name)
		switch {
		case !declared:
			c.addf(where+".name", "%q is not an %s the bundle declares for this graph (%s)", t.Name, kind, declNames(decls))
			continue
		case named[t.Name]:
			c.addf(where+".name", "%q is described twice", t.Name)
			continue
		}
		named[t.Name] = true
		steps, ok := c.path(must(e, "path"), where+".path", output, params)
		if !ok {
			continue
		}
		t.Locator = Locator{Path: steps, IsOutput: output}
		if want := t.Locator.TensorName(); want != t.Name {
			c.addf(where, "path %s names the tensor %q under AITune's naming contract, not %q (AITune binds engine tensors by that name)", t.Locator, want, t.Name)
			continue
		}
		if mv, ok := e.Get("bs_multipliers"); ok {
			t.Multipliers = c.multipliers(mv, where+".bs_multipliers", decl)
		}
		out = append(out, t)
	}
	for _, d := range decls {
		if !named[d.Name] {
			c.addf(path, "declared %s %q has no locator", kind, d.Name)
		}
	}
	return out
}

func findDecl(decls []bundle.TensorDecl, name string) (bundle.TensorDecl, bool) {
	for _, d := range decls {
		if d.Name == name {
			return d, true
		}
	}
	return bundle.TensorDecl{}, false
}

func declNames(decls []bundle.TensorDecl) string {
	names := make([]string, len(decls))
	for i, d := range decls {
		names[i] = fmt.Sprintf("%q", d.Name)
	}
	return strings.Join(names, ", ")
}

// path reads an access path [[key, "TYPE"], …] (the schema checked each
// step's form) and checks where it starts.
func (c *checker) path(n *jsontree.Node, where string, output bool, params []Parameter) ([]Step, bool) {
	steps := make([]Step, 0, len(n.Arr))
	good := true
	for i, e := range n.Arr {
		sw := fmt.Sprintf("%s[%d]", where, i)
		var k Key
		if kn := e.Arr[0]; kn.Kind == jsontree.String {
			k = Name(kn.Str)
		} else if iv, ok := kn.AsInt(); ok {
			k = Index(iv)
		} else {
			c.addf(sw+"[0]", "key %s is not an integer", kn.Num)
			good = false
			continue
		}
		t, _ := parseObjectType(e.Arr[1].Str)
		switch {
		case (t == Dataclass || t == UserType) && !isPyIdentifier(k.Name):
			c.addf(sw, "a %s step needs an attribute name, got %s", t, k)
			good = false
			continue
		case output && (t == Dataclass || t == UserType):
			c.addf(sw, "outputs inside a %s cannot be rebuilt outside Python (AITune needs the real class for the output object); only list, tuple and dict outputs are supported", t)
			good = false
			continue
		}
		steps = append(steps, Step{Key: k, Type: t})
	}
	if !good {
		return nil, false
	}
	if output {
		return steps, true
	}
	// Inputs are walked from the bound-arguments dict.
	if len(steps) == 0 {
		c.addf(where, "an input path starts with its forward parameter, e.g. [[\"x\", \"DICT\"]]")
		return nil, false
	}
	first := steps[0]
	if first.Type != DictKey || first.Key.IsIndex {
		c.addf(where+"[0]", "an input path starts with its forward parameter as a DICT step, e.g. [\"x\", \"DICT\"]")
		return nil, false
	}
	i := slices.IndexFunc(params, func(p Parameter) bool { return p.Name == first.Key.Name })
	if i < 0 {
		c.addf(where+"[0]", "%q is not a parameter of the forward signature", first.Key.Name)
		return nil, false
	}
	switch params[i].Kind {
	case "VAR_POSITIONAL":
		if len(steps) < 2 || steps[1].Type != Sequence {
			c.addf(where, "*%s collects a tuple: its path continues with a SEQUENCE step, e.g. [[%q, \"DICT\"], [0, \"SEQUENCE\"]]", first.Key.Name, first.Key.Name)
			return nil, false
		}
	case "VAR_KEYWORD":
		if len(steps) < 2 || steps[1].Type != DictKey || steps[1].Key.IsIndex {
			c.addf(where, "**%s collects a dict: its path continues with a DICT step naming the keyword", first.Key.Name)
			return nil, false
		}
	}
	return steps, true
}

// multipliers reads bs_multipliers against the declared shape.
func (c *checker) multipliers(n *jsontree.Node, where string, decl bundle.TensorDecl) []float64 {
	if len(n.Arr) != decl.Rank() {
		c.addf(where, "has %d entries, tensor %q has rank %d", len(n.Arr), decl.Name, decl.Rank())
		return nil
	}
	out := make([]float64, len(n.Arr))
	good := true
	for i, e := range n.Arr {
		ax := decl.Shape[i]
		aw := fmt.Sprintf("%s[%d]", where, i)
		if e.Kind == jsontree.Null {
			out[i] = math.NaN()
			if ax.IsBatch() {
				c.addf(aw, "axis %d is a batch axis (%s): its multiplier must be a positive integer, not null", i, ax)
				good = false
			}
			continue
		}
		f, ok := e.AsFloat()
		if !ok {
			c.addf(aw, "%s is not a finite number", e.Num)
			good = false
			continue
		}
		out[i] = f
		switch {
		case ax.IsBatch() && (f <= 0 || f != math.Trunc(f)):
			c.addf(aw, "axis %d is a batch axis (%s): its multiplier must be a positive integer, got %s", i, ax, e.Num)
			good = false
		case !ax.IsStatic() && !ax.IsBatch():
			c.addf(aw, "axis %d is a dynamic axis (%s): its multiplier is unknown, write null", i, ax)
			good = false
		}
	}
	if !good {
		return nil
	}
	return out
}

func (c *checker) others(n *jsontree.Node, where string, params []Parameter) []OtherValue {
	var out []OtherValue
	for i, e := range n.Arr {
		ew := fmt.Sprintf("%s[%d]", where, i)
		steps, ok := c.path(must(e, "path"), ew+".path", false, params)
		if !ok {
			continue
		}
		s, ok := c.scalar(must(e, "value"), ew+".value")
		if !ok {
			continue
		}
		out = append(out, OtherValue{Locator: Locator{Path: steps}, Value: s})
	}
	return out
}

// scalar reads a non-tensor leaf value (the schema allows only null,
// booleans, numbers and strings). A number without '.' or an exponent is a
// Python int, otherwise a float: 1 and 1.0 compare equal in Python, but
// the checkpoint should hold what the recorder saw.
func (c *checker) scalar(n *jsontree.Node, where string) (Scalar, bool) {
	switch n.Kind {
	case jsontree.Bool:
		return Scalar{Kind: ScalarBool, Bool: n.Bool}, true
	case jsontree.String:
		return Scalar{Kind: ScalarString, Str: n.Str}, true
	case jsontree.Number:
		if i, ok := n.AsInt(); ok {
			return Scalar{Kind: ScalarInt, Int: i}, true
		}
		if strings.ContainsAny(string(n.Num), ".eE") {
			if f, ok := n.AsFloat(); ok {
				return Scalar{Kind: ScalarFloat, Float: f}, true
			}
		}
		c.addf(where, "number %s does not fit a 64-bit int or a finite float", n.Num)
		return Scalar{}, false
	}
	return Scalar{Kind: ScalarNone}, true
}
