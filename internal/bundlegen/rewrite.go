package bundlegen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/fsutil"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
)

// rewriteModel writes, into dir, the model with only the outputs keep
// names (nodes and initializers nothing kept needs are dropped) and, with
// dynamicBatch, axis 0 of every input and output that is fixed at 1 turned
// into the dim "batch". The model's external data files are linked (or
// copied) beside the rewritten model, where it looks for them. It returns
// the rewritten model's path and which inputs were made batch-dynamic.
func rewriteModel(modelPath, dir string, keep []string, dynamicBatch bool) (string, []string, error) {
	raw, err := os.ReadFile(modelPath)
	if err != nil {
		return "", nil, err
	}
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(raw, &m); err != nil {
		return "", nil, fmt.Errorf("%s: not an ONNX model: %w", modelPath, err)
	}
	g := m.GetGraph()
	if len(keep) > 0 {
		var names []string
		for _, o := range g.GetOutput() {
			names = append(names, o.GetName())
		}
		var kept []*onnxpb.ValueInfoProto
		for _, k := range keep {
			i := slices.Index(names, k)
			if i < 0 {
				return "", nil, fmt.Errorf("--outputs names %q, which is not an output (outputs: %s)", k, strings.Join(names, ", "))
			}
			if slices.ContainsFunc(kept, func(v *onnxpb.ValueInfoProto) bool { return v.GetName() == k }) {
				return "", nil, fmt.Errorf("--outputs names %q twice", k)
			}
			kept = append(kept, g.GetOutput()[i])
		}
		g.Output = kept
		prune(g)
	}
	var batched []string
	if dynamicBatch {
		one := func(v *onnxpb.ValueInfoProto) bool {
			dims := v.GetType().GetTensorType().GetShape().GetDim()
			if len(dims) == 0 || dims[0].GetDimParam() != "" || dims[0].GetDimValue() != 1 {
				return false
			}
			dims[0].Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "batch"}
			return true
		}
		for _, in := range g.GetInput() {
			if one(in) {
				batched = append(batched, in.GetName())
			}
		}
		if len(batched) == 0 {
			return "", nil, fmt.Errorf("--dynamic-batch: no input of %s has a batch axis fixed at 1 (axis 0 of size 1) to make dynamic", modelPath)
		}
		for _, out := range g.GetOutput() {
			one(out)
		}
		// Shapes recorded inside the graph were inferred at batch 1; ONNX
		// Runtime infers them again.
		g.ValueInfo = nil
	}
	out, err := proto.Marshal(&m)
	if err != nil {
		return "", nil, fmt.Errorf("rewrite %s: %w", modelPath, err)
	}
	dst := filepath.Join(dir, filepath.Base(modelPath))
	if err := os.WriteFile(dst, out, 0o644); err != nil {
		return "", nil, err
	}
	gio, err := bundle.ReadGraphIO(modelPath)
	if err != nil {
		return "", nil, err
	}
	for _, loc := range gio.ExternalData {
		if !filepath.IsLocal(filepath.FromSlash(loc)) {
			continue // bundle.Open refuses it and says why
		}
		if err := fsutil.LinkOrCopy(filepath.Join(filepath.Dir(modelPath), filepath.FromSlash(loc)), filepath.Join(dir, filepath.FromSlash(loc))); err != nil {
			return "", nil, fmt.Errorf("external data %q of %s: %w", loc, modelPath, err)
		}
	}
	return dst, batched, nil
}

// proveBatchAgnostic runs the batch-dynamic model at batch 2 on two
// stacked batch-1 inputs and compares its outputs with the original
// model's on each of them, stacked: a graph that keeps batch 1 inside (a
// Reshape to a constant shape, a batch-mixing op) fails or differs, and is
// refused with what went wrong.
func proveBatchAgnostic(ctx context.Context, original string, g bundle.Graph, batched []string, o ONNXOptions) error {
	orig, err := referenceEngine(ctx, original, g, o)
	if err != nil {
		return fmt.Errorf("--dynamic-batch: the original model: %w", err)
	}
	defer orig.Close()
	dyn, err := referenceEngine(ctx, filepath.Join(o.WorkDir, "rewritten", filepath.Base(original)), g, o)
	if err != nil {
		return fmt.Errorf("--dynamic-batch: the batch-dynamic model does not load: %w", err)
	}
	defer dyn.Close()
	rng := rand.New(rand.NewPCG(o.Seed, 2))
	at := func(d bundle.TensorDecl, bs int64) []int64 {
		s := append([]int64{}, d.Min...)
		if slices.Contains(batched, d.Name) {
			s[0] = bs
		}
		return s
	}
	var ins [2][]bundle.Tensor
	var refs [2][]bundle.Tensor
	for k := range 2 {
		for _, d := range g.Inputs {
			t := randomTensor(rng, d.Name, d.DType, at(d, 1), o.IntLo, o.IntHi)
			if v, ok := o.Values[d.Name]; ok {
				fill(t, v)
			}
			ins[k] = append(ins[k], t)
		}
		// Inputs without the batch (a sample rate) are the same in both.
		for i, d := range g.Inputs {
			if k == 1 && !slices.Contains(batched, d.Name) {
				ins[1][i] = ins[0][i]
			}
		}
		if refs[k], err = orig.Run(ctx, ins[k], outSpecs(g)); err != nil {
			return fmt.Errorf("--dynamic-batch: the original model does not run at batch 1: %w", err)
		}
	}
	var stacked []bundle.Tensor
	for i, d := range g.Inputs {
		if slices.Contains(batched, d.Name) {
			stacked = append(stacked, stack(ins[0][i], ins[1][i]))
		} else {
			stacked = append(stacked, ins[0][i])
		}
	}
	got, err := dyn.Run(ctx, stacked, outSpecs(g))
	if err != nil {
		return fmt.Errorf("--dynamic-batch: the graph is not batch-agnostic: it does not run at batch 2 (it keeps batch 1 fixed inside, e.g. a Reshape to a constant shape): ONNX Runtime: %s; make the batch dynamic at export instead", clipORT(err))
	}
	var want []bundle.Tensor
	for i := range refs[0] {
		a, b := refs[0][i], refs[1][i]
		if len(a.Shape) > 0 && a.Shape[0] == 1 && i < len(got) && len(got[i].Shape) > 0 && got[i].Shape[0] == 2 {
			want = append(want, stack(a, b))
		} else {
			want = append(want, a)
		}
	}
	if err := backend.Check(got, want, g.Tolerances); err != nil {
		return fmt.Errorf("--dynamic-batch: the graph is not batch-agnostic: at batch 2 its outputs are not those of two batch-1 runs stacked: %s; make the batch dynamic at export instead", clipORT(err))
	}
	return nil
}

// stack concatenates two tensors along axis 0.
func stack(a, b bundle.Tensor) bundle.Tensor {
	shape := append([]int64{}, a.Shape...)
	shape[0] += b.Shape[0]
	return bundle.Tensor{Name: a.Name, DType: a.DType, Shape: shape, Data: append(append([]byte{}, a.Data...), b.Data...)}
}

func outSpecs(g bundle.Graph) []backend.OutputSpec {
	out := make([]backend.OutputSpec, len(g.Outputs))
	for i, d := range g.Outputs {
		out[i] = backend.OutputSpec{Name: d.Name, DType: d.DType}
	}
	return out
}

// prune drops the nodes no kept output needs, and the initializers no
// kept node reads. A node's subgraphs (If, Loop, Scan) may read names of
// the outer graph: every name read anywhere inside them counts as read.
func prune(g *onnxpb.GraphProto) {
	need := map[string]bool{}
	for _, o := range g.GetOutput() {
		need[o.GetName()] = true
	}
	nodes := g.GetNode()
	keep := make([]bool, len(nodes))
	for i := len(nodes) - 1; i >= 0; i-- {
		n := nodes[i]
		if !slices.ContainsFunc(n.GetOutput(), func(o string) bool { return need[o] }) {
			continue
		}
		keep[i] = true
		for _, in := range n.GetInput() {
			need[in] = true
		}
		for _, a := range n.GetAttribute() {
			reads(a.GetG(), need)
			for _, sg := range a.GetGraphs() {
				reads(sg, need)
			}
		}
	}
	var kept []*onnxpb.NodeProto
	for i, n := range nodes {
		if keep[i] {
			kept = append(kept, n)
		}
	}
	g.Node = kept
	g.Initializer = slices.DeleteFunc(g.Initializer, func(t *onnxpb.TensorProto) bool { return !need[t.GetName()] })
	g.ValueInfo = slices.DeleteFunc(g.ValueInfo, func(v *onnxpb.ValueInfoProto) bool { return !need[v.GetName()] })
}

// reads marks every name a subgraph's nodes read.
func reads(g *onnxpb.GraphProto, need map[string]bool) {
	if g == nil {
		return
	}
	for _, n := range g.GetNode() {
		for _, in := range n.GetInput() {
			need[in] = true
		}
		for _, a := range n.GetAttribute() {
			reads(a.GetG(), need)
			for _, sg := range a.GetGraphs() {
				reads(sg, need)
			}
		}
	}
}
