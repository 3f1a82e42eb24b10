package aitune

import (
	"fmt"
	"math"

	"github.com/tunefleet/tunefleet/aitune/pickle"
	"github.com/tunefleet/tunefleet/bundle"
)

// The Python globals the checkpoint refers to. Every AITune object is built
// by calling its constructor (GLOBAL + args + REDUCE), the recipe of
// reference §3.7: it is independent of each class's private __dict__ or
// __slots__ layout, which is what Python's own NEWOBJ/BUILD form would
// depend on.
var (
	gObjectType     = pickle.Global{Module: "aitune.torch.module.locator", Name: "ObjectType"}
	gLocator        = pickle.Global{Module: "aitune.torch.module.locator", Name: "Locator"}
	gTensorSpec     = pickle.Global{Module: "aitune.torch.module.tensor_spec", Name: "TensorSpec"}
	gSampleMetadata = pickle.Global{Module: "aitune.torch.module.sample_metadata", Name: "SampleMetadata"}
	gArtifactPath   = pickle.Global{Module: "aitune.torch.checkpoint.artifact", Name: "ArtifactPath"}
	gDynamicDim     = pickle.Global{Module: "aitune.torch.dynamic_shapes", Name: "DynamicDim"}
	gBatchDim       = pickle.Global{Module: "aitune.torch.dynamic_shapes", Name: "BatchDim"}
	gDevice         = pickle.Global{Module: "torch", Name: "device"}
)

// torchDType maps a bundle dtype to the name of its torch.dtype singleton
// (torch pickles a dtype as the global torch.<name>).
var torchDType = map[bundle.DType]string{
	bundle.Float32: "float32", bundle.Float16: "float16", bundle.BFloat16: "bfloat16", bundle.Float64: "float64",
	bundle.Int8: "int8", bundle.Uint8: "uint8", bundle.Int16: "int16", bundle.Uint16: "uint16",
	bundle.Int32: "int32", bundle.Uint32: "uint32", bundle.Int64: "int64", bundle.Uint64: "uint64",
	bundle.Bool: "bool",
}

func keyValue(k Key) pickle.Value {
	if k.IsIndex {
		return pickle.Int(k.Index)
	}
	return pickle.Str(k.Name)
}

// locatorValue is Locator(access_path, is_output), access_path a tuple of
// (accessor, ObjectType) pairs.
func locatorValue(l Locator) pickle.Value {
	path := make(pickle.Tuple, len(l.Path))
	for i, s := range l.Path {
		path[i] = pickle.Tuple{keyValue(s.Key), pickle.Call{Func: gObjectType, Args: pickle.Tuple{pickle.Int(s.Type)}}}
	}
	return pickle.Call{Func: gLocator, Args: pickle.Tuple{path, pickle.Bool(l.IsOutput)}}
}

// defaultMultipliers are the _bs_multipliers a first sample of batch size
// 1 gives once later samples made the batch axes vary: 1 for batch axes,
// NaN for other dynamic axes (set when an axis stops tracking the batch),
// and size/1 for axes that never changed.
func defaultMultipliers(d bundle.TensorDecl) []float64 {
	m := make([]float64, d.Rank())
	for i, ax := range d.Shape {
		switch {
		case ax.IsBatch():
			m[i] = 1
		case !ax.IsStatic():
			m[i] = math.NaN()
		default:
			m[i] = float64(ax.Size)
		}
	}
	return m
}

// tensorSpecValue is TensorSpec(shape, min_shape, max_shape, dtype,
// _bs_multipliers) for a declared tensor.
func tensorSpecValue(d bundle.TensorDecl, mult []float64) (pickle.Value, error) {
	dt, ok := torchDType[d.DType]
	if !ok {
		return nil, fmt.Errorf("tensor %q: dtype %q has no torch equivalent", d.Name, d.DType)
	}
	if mult == nil {
		mult = defaultMultipliers(d)
	}
	shape, lo, hi, mul := pickle.List{}, pickle.List{}, pickle.List{}, pickle.List{}
	for i, ax := range d.Shape {
		if ax.IsStatic() {
			shape = append(shape, pickle.Int(ax.Size))
		} else {
			shape = append(shape, pickle.Str(ax.Label))
		}
		lo = append(lo, pickle.Int(d.Min[i]))
		hi = append(hi, pickle.Int(d.Max[i]))
		mul = append(mul, pickle.Float(mult[i]))
	}
	return pickle.Call{Func: gTensorSpec, Args: pickle.Tuple{shape, lo, hi, pickle.Global{Module: "torch", Name: dt}, mul}}, nil
}

// tensorData is SampleMetadata._tensor_data: ((Locator, TensorSpec), …).
func tensorData(ts []TensorLocator, decls []bundle.TensorDecl) (pickle.Tuple, error) {
	out := pickle.Tuple{}
	for _, t := range ts {
		d, ok := findDecl(decls, t.Name)
		if !ok {
			return nil, fmt.Errorf("tensor %q is not declared", t.Name)
		}
		spec, err := tensorSpecValue(d, t.Multipliers)
		if err != nil {
			return nil, err
		}
		out = append(out, pickle.Tuple{locatorValue(t.Locator), spec})
	}
	return out, nil
}

// otherData is SampleMetadata._other_data: ((Locator, value), …).
func otherData(os []OtherValue) pickle.Tuple {
	out := pickle.Tuple{}
	for _, o := range os {
		out = append(out, pickle.Tuple{locatorValue(o.Locator), scalarValue(o.Value)})
	}
	return out
}

func scalarValue(s Scalar) pickle.Value {
	switch s.Kind {
	case ScalarBool:
		return pickle.Bool(s.Bool)
	case ScalarInt:
		return pickle.Int(s.Int)
	case ScalarFloat:
		return pickle.Float(s.Float)
	case ScalarString:
		return pickle.Str(s.Str)
	}
	return pickle.None{}
}

// skeletonValue is the output_object: list/tuple/dict containers, a
// namedtuple or an OrderedDict (subclass) pickled as Python pickles it
// (AITune's checkpoint steps only descend into exact dict/list/tuple, and
// an output object holds no artifact).
func skeletonValue(s Skeleton) pickle.Value {
	switch s.Kind {
	case SkeletonList:
		l := pickle.List{}
		for _, it := range s.Items {
			l = append(l, skeletonValue(it))
		}
		return l
	case SkeletonTuple:
		t := pickle.Tuple{}
		for _, it := range s.Items {
			t = append(t, skeletonValue(it))
		}
		if s.Class != nil {
			return pickle.NewObj{Class: pickle.Global{Module: s.Class.Module, Name: s.Class.Qualname}, Args: t}
		}
		return t
	case SkeletonDict:
		d := pickle.Dict{}
		for i, k := range s.Keys {
			d = append(d, pickle.Item{Key: pickle.Str(k), Value: skeletonValue(s.Items[i])})
		}
		if s.Class != nil {
			o := pickle.Object{Func: pickle.Global{Module: s.Class.Module, Name: s.Class.Qualname}, Args: pickle.Tuple{}, Items: d}
			if s.State != nil {
				o.State = skeletonValue(*s.State)
			}
			return o
		}
		return d
	}
	return scalarValue(s.Leaf)
}

func optStr(s string) pickle.Value {
	if s == "" {
		return pickle.None{}
	}
	return pickle.Str(s)
}

// sampleMetadata holds one SampleMetadata's parts.
type sampleMetadata struct {
	tensor, other pickle.Tuple
	strict        bool
	llmPhase      string
}

// object is the SampleMetadata instance GraphSpec.to_dict() keeps.
func (sm sampleMetadata) object() pickle.Value {
	return pickle.Call{Func: gSampleMetadata, Args: pickle.Tuple{sm.tensor, sm.other, pickle.Bool(sm.strict), optStr(sm.llmPhase)}}
}

// dict is SampleMetadata.to_dict(), the key of a backends pair: the
// tuples travel as separate pickle streams (bytes), which from_dict
// pickle.loads. AITune writes them with Python's default protocol; any
// protocol loads, and protocol 2 keeps one writer.
func (sm sampleMetadata) dict() (pickle.Dict, error) {
	td, err := pickle.Marshal(sm.tensor)
	if err != nil {
		return nil, err
	}
	od, err := pickle.Marshal(sm.other)
	if err != nil {
		return nil, err
	}
	return pickle.D("tensor_data", pickle.Bytes(td), "other_data", pickle.Bytes(od),
		"strict", pickle.Bool(sm.strict), "llm_phase", optStr(sm.llmPhase)), nil
}

func forwardSignatureValue(params []Parameter) pickle.Dict {
	ps := pickle.List{}
	for _, p := range params {
		ps = append(ps, pickle.D("name", pickle.Str(p.Name), "kind", pickle.Str(p.Kind), "has_default", pickle.Bool(p.HasDefault)))
	}
	return pickle.D("parameters", ps)
}

func dimValue(d Dim) pickle.Value {
	if d.IsStatic() {
		return pickle.Int(d.Size)
	}
	g := gDynamicDim
	if d.Batch {
		g = gBatchDim
	}
	var opt pickle.Value = pickle.None{}
	if d.Opt != nil {
		opt = pickle.Int(*d.Opt)
	}
	return pickle.Call{Func: g, Args: pickle.Tuple{pickle.Str(d.Name), pickle.Int(d.Min), pickle.Int(d.Max), opt}}
}

// dynamicShapesValue is a DynamicShapes dict: a parameter name (1-element
// path) or a tuple path, mapped to a tuple of ints and dims (Module's
// validation requires tuples).
func dynamicShapesValue(ds []DynamicShape) pickle.Dict {
	d := pickle.Dict{}
	for _, s := range ds {
		var key pickle.Value
		if len(s.Path) == 1 {
			key = keyValue(s.Path[0])
		} else {
			t := pickle.Tuple{}
			for _, k := range s.Path {
				t = append(t, keyValue(k))
			}
			key = t
		}
		dims := pickle.Tuple{}
		for _, dm := range s.Dims {
			dims = append(dims, dimValue(dm))
		}
		d = append(d, pickle.Item{Key: key, Value: dims})
	}
	return d
}

func deviceValue(index int) pickle.Value {
	return pickle.Call{Func: gDevice, Args: pickle.Tuple{pickle.Str("cuda"), pickle.Int(index)}}
}

// artifactValue is ArtifactPath(".", rel): a checkpoint-relative artifact,
// as CopyBackendArtifactsTask leaves it and RelocateBackendArtifactsTask
// expects it.
func artifactValue(rel string) pickle.Value {
	return pickle.Call{Func: gArtifactPath, Args: pickle.Tuple{pickle.Str("."), pickle.Str(rel)}}
}

// trtConfigValue is TensorRTBackendConfig.to_dict() with AITune's
// defaults: exactly its 11 fields, in dataclass order (from_dict passes
// them to the constructor, so an extra or missing key fails the load).
// Only use_cuda_graphs matters once the engine exists; profiles stay
// "single" because the profiles in effect are read from the saved JSON.
func trtConfigValue(useCUDAGraphs bool) pickle.Dict {
	n := pickle.None{}
	return pickle.D(
		"use_dynamo", pickle.Bool(true),
		"workspace_size", n,
		"opset_version", n,
		"optimization_level", n,
		"compatibility_level", n,
		"timing_cache", n,
		"profiles", pickle.Str("single"),
		"device", pickle.Str("cuda"),
		"quantization_config", n,
		"enable_tf32", pickle.Bool(true),
		"use_cuda_graphs", pickle.Bool(useCUDAGraphs),
	)
}

// graphSpecs builds a graph's input and output SampleMetadata.
func graphSpecs(bg *BlockGraph, decl bundle.Graph) (in, out sampleMetadata, err error) {
	td, err := tensorData(bg.Inputs, decl.Inputs)
	if err != nil {
		return in, out, err
	}
	od, err := tensorData(bg.Outputs, decl.Outputs)
	if err != nil {
		return in, out, err
	}
	// The LLM phase is derived from the inputs only (from_outputs never
	// sets it).
	in = sampleMetadata{tensor: td, other: otherData(bg.OtherInputs), strict: bg.Strict, llmPhase: bg.LLMPhase}
	out = sampleMetadata{tensor: od, other: otherData(bg.OtherOutputs), strict: bg.Strict}
	return in, out, nil
}

// graphSpecDict is GraphSpec.to_dict(): the SampleMetadata stay objects.
func graphSpecDict(b *Block, bg *BlockGraph, in, out sampleMetadata) pickle.Dict {
	return pickle.D(
		"type", pickle.Str("GraphSpec"),
		"name", pickle.Str(bg.SpecName),
		"input_spec", in.object(),
		"output_spec", out.object(),
		"forward_signature", forwardSignatureValue(b.Parameters),
		"dynamic_shapes", dynamicShapesValue(bg.DynamicShapes),
	)
}

// stateValue is the whole state_dict: {"": <Module dict>}, the form
// Module.state_dict() gives a top-level wrapped module (torch uses an
// OrderedDict; a plain dict loads the same when there is no _metadata to
// carry). backends holds each graph's
// backend dict, already numbered, in graph order.
func stateValue(b *Block, keys []pickle.Dict, backends []pickle.Dict) pickle.Value {
	pairs := pickle.List{}
	for i := range backends {
		pairs = append(pairs, pickle.Tuple{keys[i], backends[i]})
	}
	var ds pickle.Value = pickle.None{}
	if b.DynamicShapes != nil {
		ds = dynamicShapesValue(b.DynamicShapes)
	}
	tuned := pickle.D(
		"backends", pairs,
		"check_graph", pickle.Bool(true),
		// TensorRT and ONNX Runtime backends are ahead-of-time: from_dict
		// moves the original module to "meta" and the engines run alone.
		"is_any_jit", pickle.Bool(false),
		"module_name", pickle.Str(b.Name),
		"forward_signature", forwardSignatureValue(b.Parameters),
	)
	module := pickle.D(
		"type", pickle.Str("Module"),
		"name", pickle.Str(b.Name),
		"dynamic_shapes", ds,
		"tuned_module", tuned,
	)
	sd := pickle.D("", module)
	if len(b.ModuleVersions) == 0 {
		return sd
	}
	// What torch.save writes for Module.state_dict(): an OrderedDict whose
	// _metadata attribute (set by BUILD) holds each submodule's version.
	// torch's load_state_dict reads it from there; AITune's loader passes
	// this very object on to it after taking its own "" entry out.
	od := pickle.Global{Module: "collections", Name: "OrderedDict"}
	meta := pickle.Dict{}
	for _, mv := range b.ModuleVersions {
		meta = append(meta, pickle.Item{Key: pickle.Str(mv.Prefix), Value: pickle.D("version", pickle.Int(mv.Version))})
	}
	return pickle.Object{Func: od, Items: sd, State: pickle.D("_metadata", pickle.Object{Func: od, Items: meta})}
}
