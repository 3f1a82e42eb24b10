package triton

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/state"
)

// Platforms and backends as Triton names them.
const (
	PlatformTensorRT = "tensorrt_plan"
	BackendTensorRT  = "tensorrt"
	PlatformONNX     = "onnxruntime_onnx"
	BackendONNX      = "onnxruntime"

	// PlanFile and ONNXFile are Triton's default model file names.
	PlanFile = "model.plan"
	ONNXFile = "model.onnx"
)

// PreferredWithin is how close to the best measured throughput a batch
// size must come to be a preferred batch size of the dynamic batcher: the
// batcher then forms batches the winner runs (nearly) as efficiently as
// its best, and does not wait for larger ones that gain nothing.
const PreferredWithin = 0.10

// Tensor is one input or output of a Triton model.
type Tensor struct {
	Name     string  `json:"name"`
	DataType string  `json:"data_type"` // TYPE_FP32, …
	Dims     []int64 `json:"dims"`      // without the batch axis when MaxBatchSize > 0; -1 where dynamic
	// Scalar: the tensor has only its batch axis; Triton declares it
	// dims [1] with an empty reshape.
	Scalar bool `json:"scalar,omitempty"`
}

// Config is the config.pbtxt of one graph's Triton model.
type Config struct {
	Name          string   `json:"name"`
	Platform      string   `json:"platform"`
	Backend       string   `json:"backend"`
	File          string   `json:"default_model_filename"`
	MaxBatchSize  int64    `json:"max_batch_size"`
	Inputs        []Tensor `json:"inputs"`
	Outputs       []Tensor `json:"outputs"`
	Preferred     []int64  `json:"preferred_batch_sizes,omitempty"`
	Kind          string   `json:"instance_kind"`      // KIND_GPU or KIND_CPU
	Profiles      []string `json:"profiles,omitempty"` // TensorRT optimization profiles of the engine
	GraphLevel    *int     `json:"graph_level,omitempty"`
	IntraThreads  int      `json:"intra_op_thread_count,omitempty"`
	InterThreads  int      `json:"inter_op_thread_count,omitempty"`
	NoBatchReason string   `json:"no_batch_reason,omitempty"`
	// Requires is the graph's state.Requires: Triton has no field for what
	// a model needs of the CPU or GPU, so the config carries it as the
	// parameter RequiresParameter (JSON) for deploy tooling to check, and
	// graphs.json as an object.
	Requires *state.Requires `json:"requires,omitempty"`
}

// RequiresParameter is the config.pbtxt parameter that holds an engine's
// requirement as JSON (state.Requires). Triton and its backends ignore
// parameters they do not know.
const RequiresParameter = "tunefleet.requires"

// dataTypes maps bundle dtypes to Triton's DataType names.
var dataTypes = map[bundle.DType]string{
	bundle.Float32: "TYPE_FP32", bundle.Float16: "TYPE_FP16", bundle.BFloat16: "TYPE_BF16", bundle.Float64: "TYPE_FP64",
	bundle.Int8: "TYPE_INT8", bundle.Uint8: "TYPE_UINT8", bundle.Int16: "TYPE_INT16", bundle.Uint16: "TYPE_UINT16",
	bundle.Int32: "TYPE_INT32", bundle.Uint32: "TYPE_UINT32", bundle.Int64: "TYPE_INT64", bundle.Uint64: "TYPE_UINT64",
	bundle.Bool: "TYPE_BOOL",
}

// DataType is Triton's name of a dtype.
func DataType(d bundle.DType) (string, error) {
	if t, ok := dataTypes[d]; ok {
		return t, nil
	}
	return "", fmt.Errorf("dtype %q has no Triton data type", d)
}

// ortGraphLevels is Triton's onnxruntime backend's optimization.graph.level
// for each ONNX Runtime level a candidate names (onnxruntime_backend:
// -1 basic, 1 extended, 2 disabled, anything else all).
var ortGraphLevels = map[string]int{"basic": -1, "extended": 1, "disabled": 2, "all": 0}

// NewConfig builds the config of graph g of a state. io is what the
// engine's ONNX file declares (ONNX Runtime winners; nil for TensorRT).
func NewConfig(name string, st *state.State, g state.StateGraph, io *bundle.GraphIO) (*Config, error) {
	if g.Engine == nil || g.Candidate == "" {
		return nil, fmt.Errorf("graph %s has no winner", g.Name)
	}
	cand, err := backend.ParseCandidate(g.Candidate)
	if err != nil {
		return nil, fmt.Errorf("graph %s: %w", g.Name, err)
	}
	c := &Config{Name: name, Kind: "KIND_GPU"}
	switch cand.Backend {
	case "trt":
		c.Platform, c.Backend, c.File = PlatformTensorRT, BackendTensorRT, PlanFile
		// The engine is built with one optimization profile: the graph's
		// (trt's build), profile 0.
		c.Profiles = []string{"0"}
	case "ort":
		cfg, err := ort.ParseConfig(cand)
		if err != nil {
			return nil, fmt.Errorf("graph %s: %w", g.Name, err)
		}
		c.Platform, c.Backend, c.File = PlatformONNX, BackendONNX, ONNXFile
		if cfg.Provider == "cpu" {
			c.Kind = "KIND_CPU"
		}
		lvl, ok := ortGraphLevels[cfg.Level]
		if !ok {
			return nil, fmt.Errorf("graph %s: ONNX Runtime level %q has no Triton graph level", g.Name, cfg.Level)
		}
		c.GraphLevel = &lvl
		c.IntraThreads, c.InterThreads = cfg.IntraThreads, cfg.InterThreads
		if io == nil {
			return nil, fmt.Errorf("graph %s: the engine's ONNX inputs and outputs are needed", g.Name)
		}
	default:
		return nil, fmt.Errorf("graph %s: winner %s runs on backend %q, which Triton has no platform for here", g.Name, g.Candidate, cand.Backend)
	}
	if !strings.HasPrefix(st.Target, "gpu") && cand.Backend == "ort" {
		c.Kind = "KIND_CPU"
	}

	c.Requires = g.Requires

	// Full dims of every tensor, -1 where dynamic.
	ins, err := fullDims(g.Name, g.Inputs, g.Profile, io, true)
	if err != nil {
		return nil, err
	}
	outs, err := fullDims(g.Name, g.Outputs, shapes.Profile{}, io, false)
	if err != nil {
		return nil, err
	}
	maxBatch, why := batchOf(g, ins, outs)
	c.NoBatchReason = why
	if maxBatch > 0 {
		c.MaxBatchSize = maxBatch
	}
	for i, d := range g.Inputs {
		t, err := tensor(g.Name, d, ins[i], c.MaxBatchSize > 0)
		if err != nil {
			return nil, err
		}
		c.Inputs = append(c.Inputs, t)
	}
	for i, d := range g.Outputs {
		t, err := tensor(g.Name, d, outs[i], c.MaxBatchSize > 0)
		if err != nil {
			return nil, err
		}
		c.Outputs = append(c.Outputs, t)
	}
	if c.MaxBatchSize > 0 {
		c.Preferred = preferred(g.Benchmarks, c.MaxBatchSize)
	}
	return c, nil
}

// fullDims returns each tensor's dims with -1 where dynamic: for an ONNX
// engine, as the ONNX file declares them (what ONNX Runtime reports);
// otherwise from the graph's profile (inputs: the engine's min/max) or the
// recorded bounds.
func fullDims(graph string, decls []bundle.TensorDecl, prof shapes.Profile, io *bundle.GraphIO, inputs bool) ([][]int64, error) {
	out := make([][]int64, len(decls))
	for i, d := range decls {
		if io != nil {
			vis := io.Outputs
			if inputs {
				vis = io.Inputs
			}
			var vi *bundle.ValueInfo
			for j := range vis {
				if vis[j].Name == d.Name {
					vi = &vis[j]
				}
			}
			if vi == nil {
				return nil, fmt.Errorf("graph %s: the engine has no tensor %q", graph, d.Name)
			}
			if vi.RankKnown() {
				out[i] = append([]int64{}, vi.Dims...)
				continue
			}
		}
		lo, hi := d.Min, d.Max
		if ip, ok := prof.Input(d.Name); ok {
			lo, hi = ip.Min, ip.Max
		}
		dims := make([]int64, d.Rank())
		for a := range dims {
			switch {
			case a < len(lo) && a < len(hi) && lo[a] == hi[a] && d.Shape[a].IsStatic():
				dims[a] = lo[a]
			case a < len(lo) && a < len(hi) && lo[a] == hi[a] && io == nil:
				dims[a] = lo[a] // a TensorRT engine whose profile fixes it
			default:
				dims[a] = -1
			}
		}
		out[i] = dims
	}
	return out, nil
}

// batchOf is the max_batch_size of a graph: Triton batches along axis 0
// of every input and output, so every one must have its batch axis there
// (dynamic in the engine), and the engine must take batch 1; the largest
// batch is the smallest maximum its inputs allow. 0 and why otherwise.
func batchOf(g state.StateGraph, ins, outs [][]int64) (int64, string) {
	if len(g.Inputs) == 0 {
		return 0, "no inputs"
	}
	check := func(decls []bundle.TensorDecl, dims [][]int64) string {
		for i, d := range decls {
			if d.Rank() == 0 || !d.Shape[0].IsBatch() || d.Shape[0].Label != "batch0" {
				return fmt.Sprintf("%s has no batch axis at 0", d.Name)
			}
			if dims[i][0] != -1 {
				return fmt.Sprintf("%s's axis 0 is static (%d) in the engine", d.Name, dims[i][0])
			}
		}
		return ""
	}
	if why := check(g.Inputs, ins); why != "" {
		return 0, why
	}
	if why := check(g.Outputs, outs); why != "" {
		return 0, why
	}
	var maxB int64 = -1
	for _, d := range g.Inputs {
		lo, hi := d.Min, d.Max
		if ip, ok := g.Profile.Input(d.Name); ok {
			lo, hi = ip.Min, ip.Max
		}
		if len(lo) == 0 || len(hi) == 0 {
			return 0, d.Name + " has no bounds"
		}
		if lo[0] > 1 {
			return 0, fmt.Sprintf("%s's smallest batch is %d, and Triton sends batches of 1", d.Name, lo[0])
		}
		if maxB < 0 || hi[0] < maxB {
			maxB = hi[0]
		}
	}
	if maxB < 2 {
		return 0, "the largest batch is 1"
	}
	return maxB, ""
}

// tensor is one config tensor: batching drops axis 0.
func tensor(graph string, d bundle.TensorDecl, dims []int64, batching bool) (Tensor, error) {
	dt, err := DataType(d.DType)
	if err != nil {
		return Tensor{}, fmt.Errorf("graph %s: %s: %w", graph, d.Name, err)
	}
	t := Tensor{Name: d.Name, DataType: dt, Dims: dims}
	if batching {
		t.Dims = dims[1:]
		if len(t.Dims) == 0 {
			t.Scalar = true
		}
	} else if len(dims) == 0 {
		// Triton's non-batching models take no scalar tensors (core:
		// "cannot have empty reshape for non-batching model").
		return Tensor{}, fmt.Errorf("graph %s: %s is a scalar (rank 0) and the graph has no batch axis at 0: Triton cannot declare it (its non-batching models take no scalar tensors)", graph, d.Name)
	}
	return t, nil
}

// preferred lists the measured batch sizes whose throughput came within
// PreferredWithin of the best, at most maxBatch, ascending.
func preferred(stats []backend.Stats, maxBatch int64) []int64 {
	best := 0.0
	for _, s := range stats {
		if int64(s.BatchSize) <= maxBatch && s.Throughput > best {
			best = s.Throughput
		}
	}
	seen := map[int64]bool{}
	var out []int64
	for _, s := range stats {
		b := int64(s.BatchSize)
		if b < 1 || b > maxBatch || seen[b] || best == 0 || s.Throughput < (1-PreferredWithin)*best {
			continue
		}
		seen[b] = true
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Text renders the config in protobuf text format (config.pbtxt).
func (c *Config) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %q\n", c.Name)
	fmt.Fprintf(&b, "platform: %q\n", c.Platform)
	fmt.Fprintf(&b, "backend: %q\n", c.Backend)
	fmt.Fprintf(&b, "default_model_filename: %q\n", c.File)
	fmt.Fprintf(&b, "max_batch_size: %d\n", c.MaxBatchSize)
	b.WriteString("version_policy { latest { num_versions: 1 } }\n")
	writeTensors(&b, "input", c.Inputs)
	writeTensors(&b, "output", c.Outputs)
	if c.MaxBatchSize > 0 {
		b.WriteString("dynamic_batching {\n")
		for _, p := range c.Preferred {
			fmt.Fprintf(&b, "  preferred_batch_size: %d\n", p)
		}
		b.WriteString("}\n")
	}
	b.WriteString("instance_group [\n  {\n    count: 1\n")
	fmt.Fprintf(&b, "    kind: %s\n", c.Kind)
	for _, p := range c.Profiles {
		fmt.Fprintf(&b, "    profile: %q\n", p)
	}
	b.WriteString("  }\n]\n")
	if c.GraphLevel != nil {
		fmt.Fprintf(&b, "optimization { graph { level: %d } }\n", *c.GraphLevel)
	}
	param := func(k string, v int) {
		if v > 0 {
			fmt.Fprintf(&b, "parameters { key: %q value { string_value: %q } }\n", k, strconv.Itoa(v))
		}
	}
	param("intra_op_thread_count", c.IntraThreads)
	param("inter_op_thread_count", c.InterThreads)
	if c.Requires != nil {
		// JSON of ASCII only (operator domains, flags, versions): %q's
		// escapes are protobuf text's.
		if j, err := json.Marshal(c.Requires); err == nil {
			fmt.Fprintf(&b, "parameters { key: %q value { string_value: %q } }\n", RequiresParameter, string(j))
		}
	}
	return b.String()
}

func writeTensors(b *strings.Builder, field string, ts []Tensor) {
	fmt.Fprintf(b, "%s [\n", field)
	for i, t := range ts {
		fmt.Fprintf(b, "  {\n    name: %q\n    data_type: %s\n", t.Name, t.DataType)
		if t.Scalar {
			b.WriteString("    dims: [ 1 ]\n    reshape { shape: [ ] }\n")
		} else {
			parts := make([]string, len(t.Dims))
			for j, d := range t.Dims {
				parts[j] = strconv.FormatInt(d, 10)
			}
			fmt.Fprintf(b, "    dims: [ %s ]\n", strings.Join(parts, ", "))
		}
		b.WriteString("  }")
		if i < len(ts)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("]\n")
}
