package aitune

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/tunefleet/tunefleet/internal/onnxpb"
)

// ExternalFile is one ONNX external data file of a model: its location as
// the model names it (relative to the model file) and its local path.
type ExternalFile struct {
	Location string
	Path     string
}

// ortDataName is the name AITune's ONNXRuntimeBackend gives its model's
// external data: the exporter writes model_raw.onnx.data beside
// model_raw.onnx, and _build keeps it as the onnx_data_path artifact. The
// backend loads the model with onnxruntime.InferenceSession(path), which
// reads each tensor's external data from its location relative to the
// model, so the model must name exactly that file.
const ortDataName = "model_raw.onnx.data"

// dataAlign aligns each file's tensors in the concatenated data file: ONNX
// Runtime memory-maps external data at page-aligned offsets when it can.
const dataAlign = 4096

// relocation is a model rewritten to keep all its external data in
// model_raw.onnx.data: the new model bytes and where each original file
// starts in the new data file.
type relocation struct {
	model  []byte
	starts []int64 // per ExternalFile, in order
	size   int64
}

// relocateExternal rewrites every external-data location of the model to
// ortDataName, with offsets moved to where each file lands when the files
// are concatenated (each at a dataAlign boundary). Every location the
// model references must be one of files.
func relocateExternal(modelPath string, files []ExternalFile) (*relocation, error) {
	raw, err := os.ReadFile(modelPath)
	if err != nil {
		return nil, err
	}
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("ONNX model: %w", err)
	}
	r := &relocation{}
	start := map[string]int64{}
	sizes := map[string]int64{}
	for _, f := range files {
		st, err := os.Stat(f.Path)
		if err != nil {
			return nil, fmt.Errorf("ONNX external data %q: %w", f.Location, err)
		}
		r.size = (r.size + dataAlign - 1) / dataAlign * dataAlign
		loc := path.Clean(f.Location)
		if _, dup := start[loc]; dup {
			return nil, fmt.Errorf("ONNX external data %q is given twice", f.Location)
		}
		start[loc] = r.size
		sizes[loc] = st.Size()
		r.starts = append(r.starts, r.size)
		r.size += st.Size()
	}
	var werr error
	fix := func(t *onnxpb.TensorProto) {
		if t == nil || t.GetDataLocation() != onnxpb.TensorProto_EXTERNAL || werr != nil {
			return
		}
		var locEntry, offEntry, lenEntry *onnxpb.StringStringEntryProto
		for _, e := range t.ExternalData {
			switch e.GetKey() {
			case "location":
				locEntry = e
			case "offset":
				offEntry = e
			case "length":
				lenEntry = e
			}
		}
		if locEntry == nil {
			werr = fmt.Errorf("tensor %q keeps external data without a location", t.GetName())
			return
		}
		loc := path.Clean(locEntry.GetValue())
		base, ok := start[loc]
		if !ok {
			werr = fmt.Errorf("tensor %q keeps its data in %q, which is not among the graph's external data files", t.GetName(), locEntry.GetValue())
			return
		}
		var off int64
		if offEntry != nil {
			if off, err = strconv.ParseInt(offEntry.GetValue(), 10, 64); err != nil || off < 0 {
				werr = fmt.Errorf("tensor %q: external data offset %q is not a byte offset", t.GetName(), offEntry.GetValue())
				return
			}
		} else {
			offEntry = &onnxpb.StringStringEntryProto{Key: proto.String("offset")}
			t.ExternalData = append(t.ExternalData, offEntry)
		}
		// Without a length a reader takes the tensor to the end of its
		// file (ONNX's rule, onnx.load's way), which in the concatenated
		// file runs into the next file's data. Say the length: the
		// tensor's own size where its dtype has a fixed one, else the
		// rest of its original file, which is what "no length" meant there.
		if lenEntry == nil {
			n := sizes[loc] - off
			if own, ok := tensorBytes(t); ok && own <= n {
				n = own
			}
			if n < 0 {
				werr = fmt.Errorf("tensor %q: external data offset %d is past the end of %q (%d bytes)", t.GetName(), off, locEntry.GetValue(), sizes[loc])
				return
			}
			lenEntry = &onnxpb.StringStringEntryProto{Key: proto.String("length"), Value: proto.String(strconv.FormatInt(n, 10))}
			t.ExternalData = append(t.ExternalData, lenEntry)
		}
		locEntry.Value = proto.String(ortDataName)
		offEntry.Value = proto.String(strconv.FormatInt(base+off, 10))
	}
	walkTensors(&m, fix)
	if werr != nil {
		return nil, werr
	}
	if r.model, err = proto.Marshal(&m); err != nil {
		return nil, fmt.Errorf("ONNX model: %w", err)
	}
	return r, nil
}

// tensorBytes is the size of a tensor's raw data from its dims and dtype,
// for dtypes of a fixed element size.
func tensorBytes(t *onnxpb.TensorProto) (int64, bool) {
	var size int64
	switch t.GetDataType() {
	case int32(onnxpb.TensorProto_FLOAT), int32(onnxpb.TensorProto_INT32), int32(onnxpb.TensorProto_UINT32):
		size = 4
	case int32(onnxpb.TensorProto_DOUBLE), int32(onnxpb.TensorProto_INT64), int32(onnxpb.TensorProto_UINT64), int32(onnxpb.TensorProto_COMPLEX64):
		size = 8
	case int32(onnxpb.TensorProto_FLOAT16), int32(onnxpb.TensorProto_BFLOAT16), int32(onnxpb.TensorProto_INT16), int32(onnxpb.TensorProto_UINT16):
		size = 2
	case int32(onnxpb.TensorProto_INT8), int32(onnxpb.TensorProto_UINT8), int32(onnxpb.TensorProto_BOOL):
		size = 1
	case int32(onnxpb.TensorProto_COMPLEX128):
		size = 16
	default:
		return 0, false
	}
	n := size
	for _, d := range t.GetDims() {
		if d < 0 || d > 1<<40 {
			return 0, false
		}
		n *= d
		if n > 1<<50 {
			return 0, false
		}
	}
	return n, true
}

// walkTensors calls fn on every TensorProto of the model that can keep
// external data: initializers (sparse ones too), tensors in node
// attributes, in the subgraphs they nest and in the model's functions.
func walkTensors(m *onnxpb.ModelProto, fn func(*onnxpb.TensorProto)) {
	sparse := func(s *onnxpb.SparseTensorProto) {
		if s != nil {
			fn(s.GetValues())
			fn(s.GetIndices())
		}
	}
	var graph func(g *onnxpb.GraphProto, depth int)
	nodes := func(ns []*onnxpb.NodeProto, depth int) {
		for _, n := range ns {
			for _, a := range n.GetAttribute() {
				fn(a.GetT())
				for _, t := range a.GetTensors() {
					fn(t)
				}
				sparse(a.GetSparseTensor())
				for _, s := range a.GetSparseTensors() {
					sparse(s)
				}
				graph(a.GetG(), depth+1)
				for _, g := range a.GetGraphs() {
					graph(g, depth+1)
				}
			}
		}
	}
	graph = func(g *onnxpb.GraphProto, depth int) {
		if g == nil || depth > 64 { // bundle.Open refuses deeper nesting
			return
		}
		for _, t := range g.GetInitializer() {
			fn(t)
		}
		for _, s := range g.GetSparseInitializer() {
			sparse(s)
		}
		nodes(g.GetNode(), depth)
	}
	graph(m.GetGraph(), 0)
	for _, f := range m.GetFunctions() {
		nodes(f.GetNode(), 0)
	}
}

// concat writes the external data files one after the other, each at its
// start (zero padding between), as model_raw.onnx.data of the folder.
func (w *stager) concat(rel string, files []ExternalFile, r *relocation) error {
	dst := filepath.Join(w.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("aitune: %w", err)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("aitune: %w", err)
	}
	sha, crc := sha256.New(), crc32.NewIEEE()
	cw := &countWriter{w: io.MultiWriter(out, sha, crc)}
	for i, f := range files {
		if pad := r.starts[i] - cw.n; pad > 0 {
			if _, err := cw.Write(make([]byte, pad)); err != nil {
				out.Close()
				return fmt.Errorf("aitune: %w", err)
			}
		}
		if err := copyFileTo(cw, f.Path); err != nil {
			out.Close()
			return err
		}
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("aitune: %w", err)
	}
	w.files[rel] = fileSum{size: cw.n, sha256: hex.EncodeToString(sha.Sum(nil)), crc32: crc.Sum32()}
	return nil
}
