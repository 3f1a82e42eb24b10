package aitune

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
)

// BlockFormat is the format string of the bundle's aitune block, version 1
// (documented in SCHEMA.md).
const BlockFormat = "aitune.block/v1"

// Block is a validated aitune block: what only the recorder knows about a
// module and is needed, beside the bundle's graph declarations, to write
// an AITune checkpoint.
type Block struct {
	// Name is the AITune module name (Module.name and
	// TunedModule.module_name); it defaults to the bundle's model.
	Name string
	// Parameters is the forward signature, in signature order.
	Parameters []Parameter
	// DynamicShapes are the module's explicit dynamic shapes (the
	// dynamic_shapes argument of ait.Module), nil when it had none.
	DynamicShapes []DynamicShape
	// Graphs describes every graph of the bundle, in bundle order.
	Graphs []*BlockGraph
}

// Graph returns the description of the bundle graph with that name.
func (b *Block) Graph(name string) (*BlockGraph, bool) {
	for _, g := range b.Graphs {
		if g.Graph == name {
			return g, true
		}
	}
	return nil, false
}

// Parameter is one ForwardParameter of the forward signature.
type Parameter struct {
	Name       string
	Kind       string // POSITIONAL_ONLY, POSITIONAL_OR_KEYWORD, VAR_POSITIONAL, KEYWORD_ONLY, VAR_KEYWORD
	HasDefault bool
}

// The parameter kinds, in the order inspect.Signature requires them.
var paramKinds = []string{"POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD", "VAR_POSITIONAL", "KEYWORD_ONLY", "VAR_KEYWORD"}

// DynamicShape is one entry of a module's explicit dynamic shapes: the
// path of an input (a parameter name, or a parameter name followed by
// keys) and its dims.
type DynamicShape struct {
	Path  []Key
	Dims  []Dim
	where string
}

// Dim is one axis of an explicit dynamic shape: a static size, or an
// AITune DynamicDim / BatchDim (Batch) when Name is set.
type Dim struct {
	Size  int64
	Name  string
	Min   int64
	Max   int64
	Opt   *int64 // nil: None (profiles use Max)
	Batch bool
}

// IsStatic reports whether the dim is a fixed size.
func (d Dim) IsStatic() bool { return d.Name == "" }

func (d Dim) equal(o Dim) bool {
	return d.Size == o.Size && d.Name == o.Name && d.Min == o.Min && d.Max == o.Max && d.Batch == o.Batch &&
		(d.Opt == nil) == (o.Opt == nil) && (d.Opt == nil || *d.Opt == *o.Opt)
}

func (d Dim) String() string {
	if d.IsStatic() {
		return fmt.Sprint(d.Size)
	}
	typ, opt := "DynamicDim", "None"
	if d.Batch {
		typ = "BatchDim"
	}
	if d.Opt != nil {
		opt = fmt.Sprint(*d.Opt)
	}
	return fmt.Sprintf("%s(%q, min=%d, max=%d, opt=%s)", typ, d.Name, d.Min, d.Max, opt)
}

// BlockGraph is what the block says about one bundle graph.
type BlockGraph struct {
	Graph    string // the bundle graph name
	SpecName string // AITune's GraphSpec.name ("0", "0 (LLM phase prefill)", …)
	Strict   bool   // SampleMetadata strict flag
	LLMPhase string // "", "prefill" or "decode"
	// Inputs and Outputs bind every declared ONNX tensor to its locator, in
	// AITune's traversal order (the order of SampleMetadata.tensor_data).
	Inputs  []TensorLocator
	Outputs []TensorLocator
	// OtherInputs are the non-tensor arguments (strict mode): part of the
	// graph's identity, compared by value when AITune routes a call.
	OtherInputs []OtherValue
	// Skeleton is the output object with None where tensors go.
	Skeleton Skeleton
	// OtherOutputs are the skeleton's non-tensor leaves (strict mode),
	// derived from Skeleton.
	OtherOutputs []OtherValue
	// DynamicShapes is the subset of the module's dynamic shapes that names
	// this graph's inputs (GraphSpec.dynamic_shapes).
	DynamicShapes []DynamicShape
}

// TensorLocator binds one ONNX tensor name to its locator.
type TensorLocator struct {
	Name    string
	Locator Locator
	// Multipliers are TensorSpec._bs_multipliers, NaN for unknown; nil
	// means the default (1 for batch axes, NaN for dim axes, the size for
	// static axes, as a first sample of batch size 1 gives).
	Multipliers []float64
	where       string
}

// OtherValue is a non-tensor leaf and its value.
type OtherValue struct {
	Locator Locator
	Value   Scalar
}

// ScalarKind is the type of a Scalar.
type ScalarKind int

// Scalar kinds.
const (
	ScalarNone ScalarKind = iota
	ScalarBool
	ScalarInt
	ScalarFloat
	ScalarString
)

// Scalar is a JSON-representable Python leaf value.
type Scalar struct {
	Kind  ScalarKind
	Bool  bool
	Int   int64
	Float float64
	Str   string
}

func (s Scalar) String() string {
	switch s.Kind {
	case ScalarBool:
		if s.Bool {
			return "True"
		}
		return "False"
	case ScalarInt:
		return fmt.Sprint(s.Int)
	case ScalarFloat:
		return fmt.Sprint(s.Float)
	case ScalarString:
		return pyStrRepr(s.Str)
	}
	return "None"
}

// SkeletonKind is the type of a Skeleton node.
type SkeletonKind int

// Skeleton node kinds.
const (
	SkeletonLeaf SkeletonKind = iota
	SkeletonList
	SkeletonTuple
	SkeletonDict
)

// Skeleton is the container structure of a module's output: AITune
// deep-copies it and sets each output tensor at its locator, so only the
// containers and the non-tensor leaves matter; tensor places hold None.
type Skeleton struct {
	Kind  SkeletonKind
	Leaf  Scalar     // SkeletonLeaf
	Items []Skeleton // list/tuple items, dict values
	Keys  []string   // dict keys, in order
}

// BlockError lists every problem found in an aitune block, each naming its
// JSON path (aitune.graphs["0"].inputs[1].path …).
type BlockError struct {
	Problems []string
}

func (e *BlockError) Error() string {
	if len(e.Problems) == 1 {
		return "aitune block is invalid: " + e.Problems[0]
	}
	return fmt.Sprintf("aitune block is invalid (%d problems):\n  - %s", len(e.Problems), strings.Join(e.Problems, "\n  - "))
}

type checker struct {
	probs []string
}

func (c *checker) addf(path, format string, args ...any) {
	c.probs = append(c.probs, path+": "+fmt.Sprintf(format, args...))
}

// object checks that n is an object with only the allowed keys and
// returns false (after reporting) when it is not an object at all.
func (c *checker) object(n *jnode, path string, allowed ...string) bool {
	if n.kind != jObject {
		c.addf(path, "want an object, got %s", n.kind)
		return false
	}
	for _, k := range n.keys {
		if !slices.Contains(allowed, k) {
			c.addf(member(path, k), "unknown field (want one of %s)", strings.Join(allowed, ", "))
		}
	}
	return true
}

func (c *checker) str(n *jnode, path string) (string, bool) {
	if n.kind != jString {
		c.addf(path, "want a string, got %s", n.kind)
		return "", false
	}
	return n.str, true
}

func (c *checker) boolean(n *jnode, path string) (bool, bool) {
	if n.kind != jBool {
		c.addf(path, "want true or false, got %s", n.kind)
		return false, false
	}
	return n.b, true
}

func (c *checker) array(n *jnode, path string) ([]*jnode, bool) {
	if n.kind != jArray {
		c.addf(path, "want an array, got %s", n.kind)
		return nil, false
	}
	return n.arr, true
}

// ParseBlock parses and validates the bundle's aitune block against the
// bundle manifest m: a raw block that is empty or JSON null means "no
// block" and returns (nil, nil). Every problem is reported, each naming
// its JSON path, in one *BlockError. Call it where a bundle is accepted
// (producer submit), so that a checkpoint that cannot be written is
// refused before any tuning runs.
func ParseBlock(raw json.RawMessage, m bundle.Manifest) (*Block, error) {
	if t := strings.TrimSpace(string(raw)); t == "" || t == "null" {
		return nil, nil
	}
	const root = "aitune"
	n, err := parseJSON(raw, root)
	if err != nil {
		return nil, &BlockError{Problems: []string{err.Error()}}
	}
	c := &checker{}
	b := c.block(n, root, m)
	if len(c.probs) > 0 {
		return nil, &BlockError{Problems: c.probs}
	}
	return b, nil
}

func (c *checker) block(n *jnode, root string, m bundle.Manifest) *Block {
	if !c.object(n, root, "format", "name", "forward_signature", "dynamic_shapes", "graphs") {
		return nil
	}
	b := &Block{Name: m.Model}
	if f, ok := n.get("format"); !ok {
		c.addf(root, "format is missing (want %q)", BlockFormat)
	} else if s, ok := c.str(f, root+".format"); ok && s != BlockFormat {
		c.addf(root+".format", "is %q, want %q", s, BlockFormat)
	}
	if v, ok := n.get("name"); ok {
		if s, ok := c.str(v, root+".name"); ok {
			b.Name = s
		}
	}
	if b.Name == "" || strings.Contains(b.Name, "/") {
		c.addf(root+".name", "module name %q must be non-empty without '/' (AITune replaces '/' with '_')", b.Name)
	}
	if v, ok := n.get("forward_signature"); !ok {
		c.addf(root, "forward_signature is missing")
	} else {
		b.Parameters = c.signature(v, root+".forward_signature")
	}
	gv, ok := n.get("graphs")
	if !ok {
		c.addf(root, "graphs is missing (describe every graph of the bundle)")
		return b
	}
	gpath := root + ".graphs"
	if !c.object(gv, gpath, gv.keys...) {
		return b
	}
	for i, name := range gv.keys {
		where := member(gpath, name)
		decl, ok := m.Graph(name)
		if !ok {
			c.addf(where, "names graph %q, which the bundle does not declare (graphs: %s)", name, graphNames(m))
			continue
		}
		g := c.graph(gv.vals[i], where, decl, b.Parameters)
		if g != nil {
			b.Graphs = append(b.Graphs, g)
		}
	}
	// Bundle order, which is AITune's graph creation order.
	slices.SortStableFunc(b.Graphs, func(x, y *BlockGraph) int {
		return graphIndex(m, x.Graph) - graphIndex(m, y.Graph)
	})
	for _, g := range m.Graphs {
		if _, ok := gv.get(g.Name); !ok {
			c.addf(gpath, "graph %q of the bundle is not described (AITune routes every call by graph, so every graph needs its locators)", g.Name)
		}
	}
	specNames := map[string]string{}
	for _, g := range b.Graphs {
		if prev, dup := specNames[g.SpecName]; dup {
			c.addf(member(gpath, g.Graph)+".graph_spec_name", "%q is also the graph spec name of graph %q", g.SpecName, prev)
		}
		specNames[g.SpecName] = g.Graph
	}
	dv, ok := n.get("dynamic_shapes")
	if ok && dv.kind != jNull {
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

// signature checks what ForwardSignature.from_dict needs: each parameter
// exactly {name, kind, has_default}, and a list inspect.Signature accepts.
func (c *checker) signature(n *jnode, path string) []Parameter {
	if !c.object(n, path, "parameters") {
		return nil
	}
	pv, ok := n.get("parameters")
	if !ok {
		c.addf(path, "parameters is missing")
		return nil
	}
	arr, ok := c.array(pv, path+".parameters")
	if !ok {
		return nil
	}
	var params []Parameter
	top, seenDefault := 0, false
	seen, seenKind := map[string]bool{}, map[string]bool{}
	for i, e := range arr {
		where := fmt.Sprintf("%s.parameters[%d]", path, i)
		if !c.object(e, where, "name", "kind", "has_default") {
			continue
		}
		var p Parameter
		ok := true
		for _, f := range []string{"name", "kind", "has_default"} {
			if _, present := e.get(f); !present {
				c.addf(where, "%s is missing", f)
				ok = false
			}
		}
		if !ok {
			continue
		}
		nv, _ := e.get("name")
		kv, _ := e.get("kind")
		hv, _ := e.get("has_default")
		var ok1, ok2, ok3 bool
		p.Name, ok1 = c.str(nv, where+".name")
		p.Kind, ok2 = c.str(kv, where+".kind")
		p.HasDefault, ok3 = c.boolean(hv, where+".has_default")
		if !ok1 || !ok2 || !ok3 {
			continue
		}
		kind := slices.Index(paramKinds, p.Kind)
		switch {
		case !isPyIdentifier(p.Name):
			c.addf(where+".name", "%q is not a valid Python parameter name", p.Name)
		case seen[p.Name]:
			c.addf(where+".name", "duplicate parameter name %q", p.Name)
		case kind < 0:
			c.addf(where+".kind", "%q is not a parameter kind (want one of %s)", p.Kind, strings.Join(paramKinds, ", "))
		case kind < top:
			c.addf(where+".kind", "wrong parameter order: %s parameter %q after a %s parameter", p.Kind, p.Name, paramKinds[top])
		case (p.Kind == "VAR_POSITIONAL" || p.Kind == "VAR_KEYWORD") && p.HasDefault:
			c.addf(where+".has_default", "%s parameters cannot have default values", p.Kind)
		case (p.Kind == "VAR_POSITIONAL" || p.Kind == "VAR_KEYWORD") && seenKind[p.Kind]:
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
// inspect.Parameter requires of a name.
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

func (c *checker) graph(n *jnode, where string, decl bundle.Graph, params []Parameter) *BlockGraph {
	if !c.object(n, where, "graph_spec_name", "strict", "llm_phase", "inputs", "other_inputs", "outputs", "output_skeleton") {
		return nil
	}
	g := &BlockGraph{Graph: decl.Name, SpecName: decl.Name, Strict: true}
	if v, ok := n.get("graph_spec_name"); ok {
		if s, ok := c.str(v, where+".graph_spec_name"); ok {
			if s == "" {
				c.addf(where+".graph_spec_name", "is empty")
			}
			g.SpecName = s
		}
	}
	if v, ok := n.get("strict"); ok {
		if b, ok := c.boolean(v, where+".strict"); ok {
			g.Strict = b
		}
	}
	if v, ok := n.get("llm_phase"); ok && v.kind != jNull {
		if s, ok := c.str(v, where+".llm_phase"); ok {
			switch {
			case s != "prefill" && s != "decode":
				c.addf(where+".llm_phase", "is %q, want null, \"prefill\" or \"decode\"", s)
			case !slices.ContainsFunc(params, func(p Parameter) bool { return p.Name == "cache_position" }):
				c.addf(where+".llm_phase", "an LLM phase needs a forward parameter named cache_position (AITune derives the phase from it)")
			default:
				g.LLMPhase = s
			}
		}
	}
	g.Inputs = c.tensors(n, where, "inputs", decl.Inputs, false, params)
	g.Outputs = c.tensors(n, where, "outputs", decl.Outputs, true, params)
	if v, ok := n.get("other_inputs"); ok {
		g.OtherInputs = c.others(v, where+".other_inputs", params)
		if !g.Strict && len(g.OtherInputs) > 0 {
			c.addf(where+".other_inputs", "must be empty when strict is false (AITune records non-tensor arguments only in strict mode)")
		}
	}
	c.conflicts(where+".inputs/other_inputs", append(tensorLocs(g.Inputs), otherLocs(g.OtherInputs)...))
	c.conflicts(where+".outputs", tensorLocs(g.Outputs))
	if v, ok := n.get("output_skeleton"); ok {
		g.Skeleton, ok = c.skeleton(v, where+".output_skeleton")
		if !ok {
			return g
		}
	} else {
		g.Skeleton = Skeleton{Kind: SkeletonLeaf}
	}
	c.resolveOutputs(g, where)
	return g
}

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

// tensors parses inputs or outputs: one entry per declared ONNX tensor.
func (c *checker) tensors(n *jnode, graphWhere, field string, decls []bundle.TensorDecl, output bool, params []Parameter) []TensorLocator {
	path := graphWhere + "." + field
	v, ok := n.get(field)
	if !ok {
		c.addf(graphWhere, "%s is missing (one locator per declared ONNX %s)", field, strings.TrimSuffix(field, "s"))
		return nil
	}
	arr, ok := c.array(v, path)
	if !ok {
		return nil
	}
	var out []TensorLocator
	named := map[string]bool{}
	for i, e := range arr {
		where := fmt.Sprintf("%s[%d]", path, i)
		if !c.object(e, where, "name", "path", "bs_multipliers") {
			continue
		}
		t := TensorLocator{where: where}
		nv, ok := e.get("name")
		if !ok {
			c.addf(where, "name is missing (the ONNX tensor name)")
			continue
		}
		if t.Name, ok = c.str(nv, where+".name"); !ok {
			continue
		}
		decl, declared := findDecl(decls, t.Name)
		switch {
		case !declared:
			c.addf(where+".name", "%q is not an %s the bundle declares for this graph (%s)", t.Name, strings.TrimSuffix(field, "s"), declNames(decls))
			continue
		case named[t.Name]:
			c.addf(where+".name", "%q is described twice", t.Name)
			continue
		}
		named[t.Name] = true
		pv, ok := e.get("path")
		if !ok {
			c.addf(where, "path is missing")
			continue
		}
		steps, ok := c.path(pv, where+".path", output, params)
		if !ok {
			continue
		}
		t.Locator = Locator{Path: steps, IsOutput: output}
		if want := t.Locator.TensorName(); want != t.Name {
			c.addf(where, "path %s names the tensor %q under AITune's naming contract, not %q (AITune binds engine tensors by that name)", t.Locator, want, t.Name)
			continue
		}
		if mv, ok := e.get("bs_multipliers"); ok {
			t.Multipliers = c.multipliers(mv, where+".bs_multipliers", decl)
		}
		out = append(out, t)
	}
	for _, d := range decls {
		if !named[d.Name] {
			c.addf(path, "declared %s %q has no locator", strings.TrimSuffix(field, "s"), d.Name)
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

// path parses an access path: [[key, "TYPE"], …].
func (c *checker) path(n *jnode, where string, output bool, params []Parameter) ([]Step, bool) {
	arr, ok := c.array(n, where)
	if !ok {
		return nil, false
	}
	steps := make([]Step, 0, len(arr))
	good := true
	for i, e := range arr {
		sw := fmt.Sprintf("%s[%d]", where, i)
		if e.kind != jArray || len(e.arr) != 2 {
			c.addf(sw, "want a step [key, type] such as [\"x\", \"DICT\"] or [0, \"SEQUENCE\"]")
			good = false
			continue
		}
		var k Key
		switch kn := e.arr[0]; kn.kind {
		case jString:
			k = Name(kn.str)
		case jNumber:
			iv, ok := kn.asInt()
			if !ok {
				c.addf(sw+"[0]", "key %s is not an integer", kn.num)
				good = false
				continue
			}
			k = Index(iv)
		default:
			c.addf(sw+"[0]", "key must be a string or an integer, got %s", kn.kind)
			good = false
			continue
		}
		tn := e.arr[1]
		var t ObjectType
		if tn.kind == jString {
			t, ok = parseObjectType(tn.str)
		}
		if tn.kind != jString || !ok {
			c.addf(sw+"[1]", "type must be one of \"SEQUENCE\", \"DICT\", \"DATACLASS\", \"USER_TYPE\"")
			good = false
			continue
		}
		switch {
		case t == Sequence && (!k.IsIndex || k.Index < 0):
			c.addf(sw, "a SEQUENCE step needs a non-negative integer index, got %s", k)
			good = false
			continue
		case (t == Dataclass || t == UserType) && (k.IsIndex || !isPyIdentifier(k.Name)):
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

// multipliers parses bs_multipliers against the declared shape.
func (c *checker) multipliers(n *jnode, where string, decl bundle.TensorDecl) []float64 {
	arr, ok := c.array(n, where)
	if !ok {
		return nil
	}
	if len(arr) != decl.Rank() {
		c.addf(where, "has %d entries, tensor %q has rank %d", len(arr), decl.Name, decl.Rank())
		return nil
	}
	out := make([]float64, len(arr))
	good := true
	for i, e := range arr {
		ax := decl.Shape[i]
		aw := fmt.Sprintf("%s[%d]", where, i)
		switch {
		case e.kind == jNull:
			out[i] = math.NaN()
			if ax.IsBatch() {
				c.addf(aw, "axis %d is a batch axis (%s): its multiplier must be a positive integer, not null", i, ax)
				good = false
			}
		case e.kind == jNumber:
			f, ok := e.asFloat()
			if !ok {
				c.addf(aw, "%s is not a finite number", e.num)
				good = false
				continue
			}
			out[i] = f
			switch {
			case ax.IsBatch() && (f <= 0 || f != math.Trunc(f)):
				c.addf(aw, "axis %d is a batch axis (%s): its multiplier must be a positive integer, got %s", i, ax, e.num)
				good = false
			case !ax.IsStatic() && !ax.IsBatch():
				c.addf(aw, "axis %d is a dynamic axis (%s): its multiplier is unknown, write null", i, ax)
				good = false
			}
		default:
			c.addf(aw, "want a number or null, got %s", e.kind)
			good = false
		}
	}
	if !good {
		return nil
	}
	return out
}

func (c *checker) others(n *jnode, where string, params []Parameter) []OtherValue {
	arr, ok := c.array(n, where)
	if !ok {
		return nil
	}
	var out []OtherValue
	for i, e := range arr {
		ew := fmt.Sprintf("%s[%d]", where, i)
		if !c.object(e, ew, "path", "value") {
			continue
		}
		pv, okp := e.get("path")
		vv, okv := e.get("value")
		if !okp || !okv {
			c.addf(ew, "want {\"path\": …, \"value\": …}")
			continue
		}
		steps, ok := c.path(pv, ew+".path", false, params)
		if !ok {
			continue
		}
		s, ok := c.scalar(vv, ew+".value")
		if !ok {
			continue
		}
		out = append(out, OtherValue{Locator: Locator{Path: steps}, Value: s})
	}
	return out
}

// scalar reads a non-tensor leaf value. A number without '.' or an
// exponent is a Python int, otherwise a float: 1 and 1.0 compare equal in
// Python, but the checkpoint should hold what the recorder saw.
func (c *checker) scalar(n *jnode, where string) (Scalar, bool) {
	switch n.kind {
	case jNull:
		return Scalar{Kind: ScalarNone}, true
	case jBool:
		return Scalar{Kind: ScalarBool, Bool: n.b}, true
	case jString:
		return Scalar{Kind: ScalarString, Str: n.str}, true
	case jNumber:
		if i, ok := n.asInt(); ok {
			return Scalar{Kind: ScalarInt, Int: i}, true
		}
		if strings.ContainsAny(string(n.num), ".eE") {
			if f, ok := n.asFloat(); ok {
				return Scalar{Kind: ScalarFloat, Float: f}, true
			}
		}
		c.addf(where, "number %s does not fit a 64-bit int or a finite float", n.num)
		return Scalar{}, false
	}
	c.addf(where, "want null, a boolean, a number or a string (other Python values cannot be written from Go), got %s", n.kind)
	return Scalar{}, false
}

// skeleton parses output_skeleton: a scalar leaf (null where a tensor
// goes), or {"list": […]}, {"tuple": […]}, {"dict": {…}}.
func (c *checker) skeleton(n *jnode, where string) (Skeleton, bool) {
	if n.kind != jObject {
		s, ok := c.scalar(n, where)
		return Skeleton{Kind: SkeletonLeaf, Leaf: s}, ok
	}
	if len(n.keys) != 1 {
		c.addf(where, "a container is one of {\"list\": […]}, {\"tuple\": […]} or {\"dict\": {…}}")
		return Skeleton{}, false
	}
	k, v := n.keys[0], n.vals[0]
	cw := member(where, k)
	var s Skeleton
	switch k {
	case "list", "tuple":
		s.Kind = SkeletonList
		if k == "tuple" {
			s.Kind = SkeletonTuple
		}
		arr, ok := c.array(v, cw)
		if !ok {
			return Skeleton{}, false
		}
		good := true
		for i, e := range arr {
			item, ok := c.skeleton(e, fmt.Sprintf("%s[%d]", cw, i))
			good = good && ok
			s.Items = append(s.Items, item)
		}
		return s, good
	case "dict":
		s.Kind = SkeletonDict
		if v.kind != jObject {
			c.addf(cw, "want an object mapping keys to skeletons, got %s", v.kind)
			return Skeleton{}, false
		}
		good := true
		for i, key := range v.keys {
			item, ok := c.skeleton(v.vals[i], member(cw, key))
			good = good && ok
			s.Keys = append(s.Keys, key)
			s.Items = append(s.Items, item)
		}
		return s, good
	}
	c.addf(cw, "unknown container %q (want \"list\", \"tuple\" or \"dict\")", k)
	return Skeleton{}, false
}

// resolveOutputs checks that every output locator lands on a None leaf of
// the skeleton (AITune overwrites it with the tensor), and derives the
// other leaves as the output's other_data in strict mode.
func (c *checker) resolveOutputs(g *BlockGraph, where string) {
	taken := map[*Skeleton]bool{}
	for _, t := range g.Outputs {
		leaf, err := g.Skeleton.at(t.Locator.Path)
		if err != "" {
			c.addf(t.where+".path", "%s in output_skeleton: %s", t.Locator, err)
			continue
		}
		if leaf.Kind != SkeletonLeaf {
			c.addf(t.where+".path", "%s is a container in output_skeleton, not a tensor leaf", t.Locator)
			continue
		}
		if leaf.Leaf.Kind != ScalarNone {
			c.addf(t.where+".path", "%s holds %s in output_skeleton; a tensor's place holds null", t.Locator, leaf.Leaf)
			continue
		}
		taken[leaf] = true
	}
	if !g.Strict {
		return
	}
	// Breadth-first like AITune's Locator.find_leaves.
	type item struct {
		s    *Skeleton
		path []Step
	}
	queue := []item{{&g.Skeleton, nil}}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		switch it.s.Kind {
		case SkeletonLeaf:
			if !taken[it.s] {
				g.OtherOutputs = append(g.OtherOutputs, OtherValue{Locator: Locator{Path: it.path, IsOutput: true}, Value: it.s.Leaf})
			}
		case SkeletonList, SkeletonTuple:
			for i := range it.s.Items {
				queue = append(queue, item{&it.s.Items[i], append(slices.Clip(it.path), Step{Index(int64(i)), Sequence})})
			}
		case SkeletonDict:
			for i, k := range it.s.Keys {
				queue = append(queue, item{&it.s.Items[i], append(slices.Clip(it.path), Step{Name(k), DictKey})})
			}
		}
	}
}

// at follows a path through the skeleton; the error is "" on success.
func (s *Skeleton) at(path []Step) (*Skeleton, string) {
	cur := s
	for i, st := range path {
		switch {
		case st.Type == Sequence && (cur.Kind == SkeletonList || cur.Kind == SkeletonTuple):
			if st.Key.Index >= int64(len(cur.Items)) {
				return nil, fmt.Sprintf("step %d: index %d is out of range (%d items)", i, st.Key.Index, len(cur.Items))
			}
			cur = &cur.Items[st.Key.Index]
		case st.Type == DictKey && cur.Kind == SkeletonDict:
			if st.Key.IsIndex {
				return nil, fmt.Sprintf("step %d: skeleton dict keys are strings, the path has the integer key %d", i, st.Key.Index)
			}
			j := slices.Index(cur.Keys, st.Key.Name)
			if j < 0 {
				return nil, fmt.Sprintf("step %d: no key %q", i, st.Key.Name)
			}
			cur = &cur.Items[j]
		default:
			return nil, fmt.Sprintf("step %d: a %s step meets %s", i, st.Type, cur.kindName())
		}
	}
	return cur, ""
}

func (s *Skeleton) kindName() string {
	switch s.Kind {
	case SkeletonList:
		return "a list"
	case SkeletonTuple:
		return "a tuple"
	case SkeletonDict:
		return "a dict"
	}
	return "a leaf"
}

// dynamicShapes parses the block's dynamic_shapes, in the form of AITune's
// dynamic_shapes_to_json, and checks them against AITune's rules, the
// graphs' inputs and bundle.json's dynamic_shapes.
func (c *checker) dynamicShapes(n *jnode, where string, graphs []*BlockGraph, m bundle.Manifest) []DynamicShape {
	arr, ok := c.array(n, where)
	if !ok {
		return nil
	}
	var out []DynamicShape
	byName := map[string]Dim{}
	for i, e := range arr {
		ew := fmt.Sprintf("%s[%d]", where, i)
		if !c.object(e, ew, "path", "shape") {
			continue
		}
		pv, okp := e.get("path")
		sv, oks := e.get("shape")
		if !okp || !oks {
			c.addf(ew, "want {\"path\": …, \"shape\": […]}")
			continue
		}
		ds := DynamicShape{where: ew}
		switch pv.kind {
		case jString:
			ds.Path = []Key{Name(pv.str)}
		case jArray:
			if len(pv.arr) < 2 {
				c.addf(ew+".path", "a list path has at least 2 elements (a parameter name and keys); write a bare parameter name as a string")
				continue
			}
			good := true
			for j, kn := range pv.arr {
				if j == 0 && kn.kind != jString {
					good = false
					break
				}
				if kn.kind == jString {
					ds.Path = append(ds.Path, Name(kn.str))
				} else if iv, ok := kn.asInt(); ok {
					ds.Path = append(ds.Path, Index(iv))
				} else {
					good = false
				}
			}
			if !good {
				c.addf(ew+".path", "want a parameter name followed by string or integer keys")
				continue
			}
		default:
			c.addf(ew+".path", "want a parameter name or a list [name, key, …], got %s", pv.kind)
			continue
		}
		if slices.ContainsFunc(out, func(o DynamicShape) bool { return slices.Equal(o.Path, ds.Path) }) {
			c.addf(ew+".path", "%s appears twice", pathString(ds.Path))
			continue
		}
		dims, ok := c.array(sv, ew+".shape")
		if !ok {
			continue
		}
		good := true
		for j, dn := range dims {
			d, ok := c.dim(dn, fmt.Sprintf("%s.shape[%d]", ew, j))
			if !ok {
				good = false
				continue
			}
			if !d.IsStatic() {
				if prev, seen := byName[d.Name]; seen && !prev.equal(d) {
					c.addf(fmt.Sprintf("%s.shape[%d]", ew, j), "dim %q is %s here but %s elsewhere; dims sharing a name must be identical", d.Name, d, prev)
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
	// Each path must name an input of some graph, with matching rank and
	// static sizes, and agree with bundle.json (which the engines were
	// built from).
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
	return out
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

// dim parses an int or {"type", "name", "min", "max", "opt"} and applies
// the checks AITune runs when a Module is constructed.
func (c *checker) dim(n *jnode, where string) (Dim, bool) {
	if n.kind == jNumber {
		v, ok := n.asInt()
		if !ok || v < 0 {
			c.addf(where, "a static size is an integer ≥ 0, got %s", n.num)
			return Dim{}, false
		}
		return Dim{Size: v}, true
	}
	if !c.object(n, where, "type", "name", "min", "max", "opt") {
		return Dim{}, false
	}
	var d Dim
	tv, ok := n.get("type")
	if !ok || tv.kind != jString || (tv.str != "DynamicDim" && tv.str != "BatchDim") {
		c.addf(where+".type", "want \"DynamicDim\" or \"BatchDim\"")
		return Dim{}, false
	}
	d.Batch = tv.str == "BatchDim"
	nv, ok := n.get("name")
	if !ok || nv.kind != jString || nv.str == "" {
		c.addf(where+".name", "want a non-empty string")
		return Dim{}, false
	}
	d.Name = nv.str
	good := true
	for _, f := range []struct {
		key      string
		dst      *int64
		optional bool
	}{{"min", &d.Min, false}, {"max", &d.Max, false}, {"opt", nil, true}} {
		v, ok := n.get(f.key)
		if !ok || v.kind == jNull {
			if !f.optional {
				c.addf(where, "%s is missing", f.key)
				good = false
			}
			continue
		}
		iv, ok := v.asInt()
		if !ok || iv <= 0 {
			c.addf(where+"."+f.key, "want an integer > 0")
			good = false
			continue
		}
		if f.dst != nil {
			*f.dst = iv
		} else {
			d.Opt = &iv
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

// dimsFor returns the explicit dims of an input, if any.
func (g *BlockGraph) dimsFor(t TensorLocator) ([]Dim, bool) {
	for _, ds := range g.DynamicShapes {
		if slices.Equal(ds.Path, t.Locator.Keys()) {
			return ds.Dims, true
		}
	}
	return nil, false
}

func pathString(p []Key) string {
	if len(p) == 1 {
		return p[0].repr()
	}
	parts := make([]string, len(p))
	for i, k := range p {
		parts[i] = k.repr()
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func dimsString(ds []Dim) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.String()
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
