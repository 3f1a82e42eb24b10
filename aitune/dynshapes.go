package aitune

import (
	"fmt"
	"slices"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/jsontree"
	"github.com/tunefleet/tunefleet/shapes"
)

// dynamicShapes reads the block's dynamic_shapes, in the form of AITune's
// dynamic_shapes_to_json (the schema checked the form), and checks them
// against AITune's rules, the graphs' inputs and bundle.json's
// dynamic_shapes.
func (c *checker) dynamicShapes(n *jsontree.Node, where string, graphs []*BlockGraph, m bundle.Manifest) []DynamicShape {
	var out []DynamicShape
	byName := map[string]Dim{}
	for i, e := range n.Arr {
		ew := fmt.Sprintf("%s[%d]", where, i)
		ds := DynamicShape{where: ew}
		pv := must(e, "path")
		if pv.Kind == jsontree.String {
			ds.Path = []Key{Name(pv.Str)}
		}
		good := true
		for _, kn := range pv.Arr {
			if kn.Kind == jsontree.String {
				ds.Path = append(ds.Path, Name(kn.Str))
			} else if iv, ok := kn.AsInt(); ok {
				ds.Path = append(ds.Path, Index(iv))
			} else {
				good = false
			}
		}
		if !good {
			c.addf(ew+".path", "want a parameter name followed by string or integer keys")
			continue
		}
		if slices.ContainsFunc(out, func(o DynamicShape) bool { return slices.Equal(o.Path, ds.Path) }) {
			c.addf(ew+".path", "%s appears twice", pathString(ds.Path))
			continue
		}
		for j, dn := range must(e, "shape").Arr {
			dw := fmt.Sprintf("%s.shape[%d]", ew, j)
			d, ok := c.dim(dn, dw)
			if !ok {
				good = false
				continue
			}
			if !d.IsStatic() {
				if prev, seen := byName[d.Name]; seen && !prev.equal(d) {
					c.addf(dw, "dim %q is %s here but %s elsewhere; dims sharing a name must be identical", d.Name, d, prev)
					good = false
				}
				byName[d.Name] = d
			}
			ds.Dims = append(ds.Dims, d)
		}
		if good {
			out = append(out, ds)
		}
	}
	c.dynamicShapesMatch(out, where, graphs, m)
	return out
}

// dynamicShapesMatch checks that each path names an input of some graph,
// with matching rank and static sizes, and agrees with bundle.json (which
// the engines were built from).
func (c *checker) dynamicShapesMatch(out []DynamicShape, where string, graphs []*BlockGraph, m bundle.Manifest) {
	for _, ds := range out {
		matched := false
		for _, g := range graphs {
			for _, t := range g.Inputs {
				if !slices.Equal(t.Locator.Keys(), ds.Path) {
					continue
				}
				matched = true
				decl, _ := findDecl(mustDecl(m, g.Graph).Inputs, t.Name)
				c.checkDims(ds, decl, g.Graph)
			}
		}
		if !matched {
			c.addf(ds.where+".path", "%s is not the path of any graph's input (AITune requires every dynamic shape to match a recorded tensor)", pathString(ds.Path))
		}
	}
	reported := map[string]bool{} // an input shared by graphs is reported once
	for _, g := range graphs {
		for _, t := range g.Inputs {
			if reported[t.Name] {
				continue
			}
			reported[t.Name] = true
			i := slices.IndexFunc(out, func(ds DynamicShape) bool { return slices.Equal(ds.Path, t.Locator.Keys()) })
			md, inManifest := m.DynamicShapes[t.Name]
			switch {
			case i >= 0 && !inManifest:
				c.addf(out[i].where, "input %q of graph %q has explicit dims here but none in bundle.json's dynamic_shapes, which the engines were built from", t.Name, g.Graph)
			case i < 0 && inManifest:
				c.addf(where, "bundle.json's dynamic_shapes give input %q of graph %q explicit dims, but no entry here has its path %s", t.Name, g.Graph, pathString(t.Locator.Keys()))
			case i >= 0:
				want := fromShapesDims(md)
				if !slices.EqualFunc(out[i].Dims, want, Dim.equal) {
					c.addf(out[i].where+".shape", "differs from bundle.json's dynamic_shapes[%q] (%s)", t.Name, dimsString(want))
				}
			}
		}
	}
}

func mustDecl(m bundle.Manifest, name string) bundle.Graph {
	g, _ := m.Graph(name)
	return g
}

func (c *checker) checkDims(ds DynamicShape, decl bundle.TensorDecl, graph string) {
	if len(ds.Dims) != decl.Rank() {
		c.addf(ds.where+".shape", "has %d dims, input %q of graph %q has rank %d", len(ds.Dims), decl.Name, graph, decl.Rank())
		return
	}
	for i, d := range ds.Dims {
		ax := decl.Shape[i]
		switch {
		case d.IsStatic() && (!ax.IsStatic() || ax.Size != d.Size):
			c.addf(fmt.Sprintf("%s.shape[%d]", ds.where, i), "static size %d, but input %q of graph %q has axis %d %s", d.Size, decl.Name, graph, i, ax)
		case !d.IsStatic() && (decl.Min[i] < d.Min || decl.Max[i] > d.Max):
			c.addf(fmt.Sprintf("%s.shape[%d]", ds.where, i), "%s, but input %q of graph %q was recorded with axis %d in [%d, %d]", d, decl.Name, graph, i, decl.Min[i], decl.Max[i])
		}
	}
}

// dim reads an int or {"type", "name", "min", "max", "opt"} (the schema
// checked the form) and applies the checks AITune runs when a Module is
// constructed.
func (c *checker) dim(n *jsontree.Node, where string) (Dim, bool) {
	if n.Kind == jsontree.Number {
		v, ok := n.AsInt()
		if !ok {
			c.addf(where, "a static size is an integer ≥ 0, got %s", n.Num)
			return Dim{}, false
		}
		return Dim{Size: v}, true
	}
	d := Dim{Batch: must(n, "type").Str == "BatchDim", Name: must(n, "name").Str}
	good := true
	for _, f := range []struct {
		key string
		dst **int64
	}{{"min", nil}, {"max", nil}, {"opt", &d.Opt}} {
		v, ok := get(n, f.key)
		if !ok {
			continue
		}
		iv, ok := v.AsInt()
		if !ok {
			c.addf(where+"."+f.key, "want an integer > 0, got %s", v.Num)
			good = false
			continue
		}
		switch f.key {
		case "min":
			d.Min = iv
		case "max":
			d.Max = iv
		default:
			*f.dst = &iv
		}
	}
	if !good {
		return Dim{}, false
	}
	if d.Min >= d.Max {
		c.addf(where, "min %d must be below max %d", d.Min, d.Max)
		return Dim{}, false
	}
	if d.Opt != nil && (*d.Opt < d.Min || *d.Opt > d.Max) {
		c.addf(where+".opt", "%d is outside [%d, %d]", *d.Opt, d.Min, d.Max)
		return Dim{}, false
	}
	return d, true
}

func fromShapesDims(ds []shapes.Dim) []Dim {
	out := make([]Dim, len(ds))
	for i, d := range ds {
		if d.IsStatic() {
			out[i] = Dim{Size: d.Size}
			continue
		}
		out[i] = Dim{Name: d.Name, Min: d.Min, Max: d.Max, Batch: d.Batch}
		if d.Opt != 0 {
			opt := d.Opt
			out[i].Opt = &opt
		}
	}
	return out
}

// fromManifest derives the module's dynamic shapes from bundle.json's
// (keyed by ONNX input name) through the input locators, in graph and
// input order; nil when bundle.json has none.
func fromManifest(graphs []*BlockGraph, m bundle.Manifest) []DynamicShape {
	var out []DynamicShape
	for _, g := range graphs {
		for _, t := range g.Inputs {
			dims, ok := m.DynamicShapes[t.Name]
			if !ok || slices.ContainsFunc(out, func(ds DynamicShape) bool { return slices.Equal(ds.Path, t.Locator.Keys()) }) {
				continue
			}
			out = append(out, DynamicShape{Path: t.Locator.Keys(), Dims: fromShapesDims(dims)})
		}
	}
	return out
}

// graphDynamicShapes is the subset of the module's dynamic shapes naming
// this graph's inputs, in module order, as GraphSpec.dynamic_shapes holds.
func graphDynamicShapes(g *BlockGraph, all []DynamicShape) []DynamicShape {
	var out []DynamicShape
	for _, ds := range all {
		if slices.ContainsFunc(g.Inputs, func(t TensorLocator) bool { return slices.Equal(t.Locator.Keys(), ds.Path) }) {
			out = append(out, ds)
		}
	}
	return out
}
