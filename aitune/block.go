package aitune

import (
	"fmt"
	"slices"
	"strings"
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
	// GPUWinnersOnly asks for a checkpoint only when every graph's winner
	// is a GPU-class one: AITune's ONNXRuntimeBackend runs only on CUDA
	// (the CUDA and TensorRT providers), so a CPU winner would deploy on a
	// provider that was never measured.
	GPUWinnersOnly bool
	// ModuleVersions are the recorded module's state_dict()._metadata
	// versions in recording order, the module itself under prefix "".
	// torch's load_state_dict hands each submodule its version, and some
	// modules refuse to load without one (torchvision's MNASNet), so the
	// checkpoint's state dict carries them as torch.save would.
	ModuleVersions []ModuleVersion
}

// ModuleVersion is one entry of a state dict's _metadata: a submodule's
// prefix (without the trailing dot) and its _version.
type ModuleVersion struct {
	Prefix  string
	Version int64
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
	// Class is a tuple's or dict's own class when it is not the builtin
	// one: a namedtuple (pickled with NEWOBJ over its items), an
	// OrderedDict or a subclass of it such as a ModelOutput (pickled as
	// Class(), its items set one by one, then State applied with BUILD).
	// AITune saves the module's real output object, so its checkpoint
	// references these classes by module and name.
	Class *Class
	// State is a dict class instance's attributes (its __dict__), nil when
	// it has none.
	State *Skeleton
}

// Class is a module-level Python class, as pickle references it.
type Class struct {
	Module, Qualname string
}

func (c Class) String() string { return c.Module + "." + c.Qualname }

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
