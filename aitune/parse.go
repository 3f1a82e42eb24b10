package aitune

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/jsontree"
	"github.com/tunefleet/tunefleet/schemas"
)

// ParseBlock parses and validates the bundle's aitune block against the
// bundle manifest m: a raw block that is empty or JSON null means "no
// block" and returns (nil, nil). Every problem is reported, each naming
// its JSON path, in one *BlockError. Call it where a bundle is accepted
// (producer submit), so that a checkpoint that cannot be written is
// refused before any tuning runs.
//
// The structure (fields, types, enums, the form of steps, dims and
// skeletons) is the published schema's, schemas/aitune-block.schema.json;
// its problems are reported first, all together. Once the structure is
// right, what a schema cannot say is checked here: the block against the
// bundle's graphs and tensors, AITune's naming contract and the rules
// inspect.Signature and ait.Module apply.
func ParseBlock(raw json.RawMessage, m bundle.Manifest) (*Block, error) {
	if t := strings.TrimSpace(string(raw)); t == "" || t == "null" {
		return nil, nil
	}
	const root = "aitune"
	n, err := schemas.ValidateJSON(schemas.AITuneBlock, root, raw)
	if err != nil {
		if probs := schemas.Problems(err); probs != nil {
			return nil, &BlockError{Problems: probs}
		}
		return nil, err
	}
	c := &checker{}
	b := c.block(n, root, m)
	if len(c.probs) > 0 {
		return nil, &BlockError{Problems: c.probs}
	}
	return b, nil
}

// checker collects the problems of a block whose structure the schema
// has already checked: every field it reads has the type the schema says.
type checker struct {
	probs []string
}

func (c *checker) addf(path, format string, args ...any) {
	c.probs = append(c.probs, path+": "+fmt.Sprintf(format, args...))
}

// get returns an optional member; (nil, false) when absent or null.
func get(n *jsontree.Node, key string) (*jsontree.Node, bool) {
	v, ok := n.Get(key)
	if !ok || v.Kind == jsontree.Null {
		return nil, false
	}
	return v, true
}

// must returns a member the schema requires.
func must(n *jsontree.Node, key string) *jsontree.Node {
	v, _ := n.Get(key)
	return v
}

func (c *checker) block(n *jsontree.Node, root string, m bundle.Manifest) *Block {
	b := &Block{Name: m.Model}
	if v, ok := get(n, "name"); ok {
		b.Name = v.Str
	}
	if b.Name == "" {
		c.addf(root+".name", "the module name is empty (name it here or in bundle.json's model)")
	}
	if v, ok := get(n, "gpu_winners_only"); ok {
		b.GPUWinnersOnly = v.Bool
	}
	if v, ok := get(n, "module_versions"); ok {
		for i, k := range v.Keys {
			ver, ok := v.Vals[i].AsInt()
			if !ok {
				c.addf(jsontree.Member(root+".module_versions", k), "the version %s is not an integer", v.Vals[i].Num)
				continue
			}
			b.ModuleVersions = append(b.ModuleVersions, ModuleVersion{Prefix: k, Version: ver})
		}
	}
	b.Parameters = c.signature(must(must(n, "forward_signature"), "parameters"), root+".forward_signature.parameters")
	gv, gpath := must(n, "graphs"), root+".graphs"
	for i, name := range gv.Keys {
		where := jsontree.Member(gpath, name)
		decl, ok := m.Graph(name)
		if !ok {
			c.addf(where, "names graph %q, which the bundle does not declare (graphs: %s)", name, graphNames(m))
			continue
		}
		b.Graphs = append(b.Graphs, c.graph(gv.Vals[i], where, decl, b.Parameters))
	}
	// Bundle order, which is AITune's graph creation order.
	slices.SortStableFunc(b.Graphs, func(x, y *BlockGraph) int {
		return graphIndex(m, x.Graph) - graphIndex(m, y.Graph)
	})
	for _, g := range m.Graphs {
		if _, ok := gv.Get(g.Name); !ok {
			c.addf(gpath, "graph %q of the bundle is not described (AITune routes every call by graph, so every graph needs its locators)", g.Name)
		}
	}
	specNames := map[string]string{}
	for _, g := range b.Graphs {
		if prev, dup := specNames[g.SpecName]; dup {
			c.addf(jsontree.Member(gpath, g.Graph)+".graph_spec_name", "%q is also the graph spec name of graph %q", g.SpecName, prev)
		}
		specNames[g.SpecName] = g.Graph
	}
	if dv, ok := get(n, "dynamic_shapes"); ok {
		b.DynamicShapes = c.dynamicShapes(dv, root+".dynamic_shapes", b.Graphs, m)
	} else {
		b.DynamicShapes = fromManifest(b.Graphs, m)
	}
	for _, g := range b.Graphs {
		g.DynamicShapes = graphDynamicShapes(g, b.DynamicShapes)
	}
	return b
}

func graphNames(m bundle.Manifest) string {
	names := make([]string, len(m.Graphs))
	for i, g := range m.Graphs {
		names[i] = fmt.Sprintf("%q", g.Name)
	}
	return strings.Join(names, ", ")
}

func graphIndex(m bundle.Manifest, name string) int {
	return slices.IndexFunc(m.Graphs, func(g bundle.Graph) bool { return g.Name == name })
}

func (c *checker) graph(n *jsontree.Node, where string, decl bundle.Graph, params []Parameter) *BlockGraph {
	g := &BlockGraph{Graph: decl.Name, SpecName: decl.Name, Strict: true}
	if v, ok := get(n, "graph_spec_name"); ok {
		g.SpecName = v.Str
	}
	if v, ok := get(n, "strict"); ok {
		g.Strict = v.Bool
	}
	if v, ok := get(n, "llm_phase"); ok {
		if slices.ContainsFunc(params, func(p Parameter) bool { return p.Name == "cache_position" }) {
			g.LLMPhase = v.Str
		} else {
			c.addf(where+".llm_phase", "an LLM phase needs a forward parameter named cache_position (AITune derives the phase from it)")
		}
	}
	g.Inputs = c.tensors(n, where, "inputs", decl.Inputs, false, params)
	g.Outputs = c.tensors(n, where, "outputs", decl.Outputs, true, params)
	if v, ok := get(n, "other_inputs"); ok {
		g.OtherInputs = c.others(v, where+".other_inputs", params)
		if !g.Strict && len(g.OtherInputs) > 0 {
			c.addf(where+".other_inputs", "must be empty when strict is false (AITune records non-tensor arguments only in strict mode)")
		}
	}
	c.conflicts(where+".inputs/other_inputs", append(tensorLocs(g.Inputs), otherLocs(g.OtherInputs)...))
	c.conflicts(where+".outputs", tensorLocs(g.Outputs))
	g.Skeleton = Skeleton{Kind: SkeletonLeaf}
	if v, ok := n.Get("output_skeleton"); ok {
		if g.Skeleton, ok = c.skeleton(v, where+".output_skeleton"); !ok {
			return g
		}
	}
	c.resolveOutputs(g)
	return g
}

// signature checks what ForwardSignature.from_dict needs beyond the
// schema's {name, kind, has_default}: a list inspect.Signature accepts.
func (c *checker) signature(n *jsontree.Node, path string) []Parameter {
	var params []Parameter
	top, seenDefault := 0, false
	seen, seenKind := map[string]bool{}, map[string]bool{}
	for i, e := range n.Arr {
		where := fmt.Sprintf("%s[%d]", path, i)
		p := Parameter{Name: must(e, "name").Str, Kind: must(e, "kind").Str, HasDefault: must(e, "has_default").Bool}
		kind := slices.Index(paramKinds, p.Kind)
		variadic := p.Kind == "VAR_POSITIONAL" || p.Kind == "VAR_KEYWORD"
		switch {
		case !isPyIdentifier(p.Name):
			c.addf(where+".name", "%q is not a valid Python parameter name", p.Name)
		case seen[p.Name]:
			c.addf(where+".name", "duplicate parameter name %q", p.Name)
		case kind < top:
			c.addf(where+".kind", "wrong parameter order: %s parameter %q after a %s parameter", p.Kind, p.Name, paramKinds[top])
		case variadic && p.HasDefault:
			c.addf(where+".has_default", "%s parameters cannot have default values", p.Kind)
		case variadic && seenKind[p.Kind]:
			c.addf(where+".kind", "a signature has at most one %s parameter", p.Kind)
		case kind <= 1 && !p.HasDefault && seenDefault:
			c.addf(where+".has_default", "non-default argument %q follows default argument", p.Name)
		default:
			top = max(top, kind)
			if kind <= 1 && p.HasDefault {
				seenDefault = true
			}
			seen[p.Name], seenKind[p.Kind] = true, true
			params = append(params, p)
		}
	}
	return params
}

var pyKeywords = []string{"False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
	"continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in",
	"is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield"}

// isPyIdentifier approximates str.isidentifier() and not a keyword, which
// inspect.Parameter requires of a name (a schema pattern cannot say it
// portably: Unicode classes differ between regex engines).
func isPyIdentifier(s string) bool {
	if s == "" || slices.Contains(pyKeywords, s) {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || unicode.IsLetter(r):
		case i > 0 && (unicode.IsDigit(r) || unicode.In(r, unicode.Mn, unicode.Mc, unicode.Pc)):
		default:
			return false
		}
	}
	return true
}
