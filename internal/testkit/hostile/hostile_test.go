package hostile_test

import (
	"archive/tar"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/shapes"
)

func TestMain(m *testing.M) { orttest.Main(m) }

// The classes of the table, as docs/reliability.md's "Hostile inputs" counts them.
const (
	archive = "archive tricks"
	lies    = "manifest lies"
	onnxL   = "ONNX lies"
	sample  = "sample lies"
	fleet   = "fleet-scale bundles"
)

// hostileCase is one hostile input: a bundle (directory or archive) made
// by mk, refused by every command with one line containing want, or, when
// accept is set, accepted by the policy it states.
type hostileCase struct {
	class, name string
	mk          func(t *testing.T) string
	want        string
	accept      string
}

func setDecl(f func(d *bundle.TensorDecl)) func(*bundle.Manifest) {
	return func(m *bundle.Manifest) { f(&m.Graphs[0].Inputs[0]) }
}

func explicit(dims ...shapes.Dim) func(*bundle.Manifest) {
	return func(m *bundle.Manifest) { m.DynamicShapes = shapes.DynamicShapes{"input": dims} }
}

func batchDim(lo, hi int64) shapes.Dim { return shapes.Dim{Name: "N", Min: lo, Max: hi, Batch: true} }

// externalized is a valid bundle whose ONNX file keeps its weights at
// location (written there when write is set).
func externalized(location string, write bool) func(*testing.T) string {
	return func(t *testing.T) string {
		dir := valid(t)
		bundletest.Externalize(t, filepath.Join(dir, onnx0), location, write)
		return dir
	}
}

// model is a valid bundle whose ONNX file is replaced by b's.
func model(b *onnxtest.Builder) func(*testing.T) string {
	return func(t *testing.T) string { return withFile(onnx0, b.Bytes())(t) }
}

const f32 = onnxpb.TensorProto_FLOAT

func cases() []hostileCase {
	in0 := sample0 + "/input_0.pb"
	out0 := sample0 + "/output_0.pb"
	bigSample := func(t *testing.T) string {
		dir := valid(t)
		// A sparse file: 4 GiB and 2 MiB long, no disk used.
		p := filepath.Join(dir, filepath.FromSlash(in0))
		if err := os.Truncate(p, bundle.MaxTensorBytes+2<<20); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	repeatGraphs := func(n int) func(*bundle.Manifest) {
		return func(m *bundle.Manifest) {
			g := m.Graphs[0]
			m.Graphs = nil
			for i := range n {
				g.Name = fmt.Sprint(i)
				m.Graphs = append(m.Graphs, g)
			}
		}
	}
	return []hostileCase{
		// Archive tricks.
		{class: archive, name: "absolute entry", mk: func(t *testing.T) string {
			return archiveOf(t, false, true, []entry{{h: tar.Header{Name: "/tmp/evil", Typeflag: tar.TypeReg}, data: []byte("x")}}, nil)
		}, want: "would land outside the bundle"},
		{class: archive, name: "dot-dot entry", mk: func(t *testing.T) string {
			return archiveOf(t, false, true, []entry{{h: tar.Header{Name: "../evil", Typeflag: tar.TypeReg}, data: []byte("x")}}, nil)
		}, want: "would land outside the bundle"},
		{class: archive, name: "dot-dot inside an entry", mk: func(t *testing.T) string {
			return archiveOf(t, false, false, []entry{{h: tar.Header{Name: "a/../../evil", Typeflag: tar.TypeReg}, data: []byte("x")}}, nil)
		}, want: "would land outside the bundle"},
		{class: archive, name: "backslash entry", mk: func(t *testing.T) string {
			return archiveOf(t, false, true, []entry{{h: tar.Header{Name: `..\evil`, Typeflag: tar.TypeReg}, data: []byte("x")}}, nil)
		}, want: "would land outside the bundle"},
		{class: archive, name: "symlink entry", mk: func(t *testing.T) string {
			return archiveOf(t, false, true, []entry{{h: tar.Header{Name: "link", Linkname: "/etc/passwd", Typeflag: tar.TypeSymlink}}}, nil)
		}, want: "is a link or special file"},
		{class: archive, name: "hardlink entry", mk: func(t *testing.T) string {
			return archiveOf(t, false, true, []entry{{h: tar.Header{Name: "hard", Linkname: "/etc/passwd", Typeflag: tar.TypeLink}}}, nil)
		}, want: "is a link or special file"},
		{class: archive, name: "char device", mk: func(t *testing.T) string {
			return archiveOf(t, false, true, []entry{{h: tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}}, nil)
		}, want: "is a link or special file"},
		{class: archive, name: "block device", mk: func(t *testing.T) string {
			return archiveOf(t, false, true, []entry{{h: tar.Header{Name: "sda", Typeflag: tar.TypeBlock, Devmajor: 8}}}, nil)
		}, want: "is a link or special file"},
		{class: archive, name: "FIFO", mk: func(t *testing.T) string {
			return archiveOf(t, false, true, []entry{{h: tar.Header{Name: "fifo", Typeflag: tar.TypeFifo}}}, nil)
		}, want: "is a link or special file"},
		{class: archive, name: "duplicate entry", mk: func(t *testing.T) string {
			return archiveOf(t, false, true, []entry{{h: tar.Header{Name: bundle.ManifestName, Typeflag: tar.TypeReg}, data: []byte("{}")}}, nil)
		}, want: "holds it twice"},
		{class: archive, name: "byte bomb (256 MiB of zeros, 0.3 MB compressed)", mk: func(t *testing.T) string { return bomb(t, 256<<20) },
			want: "refused as a gzip bomb"},
		{class: archive, name: "entry-count bomb", mk: func(t *testing.T) string { return manyEntries(t, bundle.DefaultArchiveLimits().MaxEntries+1) },
			want: "entries, the limit"},
		{class: archive, name: "truncated gzip", mk: func(t *testing.T) string {
			return archiveOf(t, false, true, nil, func(b []byte) []byte { return b[:len(b)/2] })
		}, want: "bundle archive"},
		{class: archive, name: "truncated tar", mk: func(t *testing.T) string {
			return archiveOf(t, false, false, nil, func(b []byte) []byte { return b[:len(b)/2+100] })
		}, want: "bundle archive"},
		{class: archive, name: "not gzip", mk: func(t *testing.T) string {
			return archiveOf(t, false, false, nil, func(b []byte) []byte { return []byte("this is not a gzip file\n") })
		}, want: "bundle archive"},
		{class: archive, name: ".tgz that is a plain tar", mk: func(t *testing.T) string {
			p := archiveOf(t, false, false, nil, nil)
			q := strings.TrimSuffix(p, ".tar") + ".tgz"
			if err := os.Rename(p, q); err != nil {
				t.Fatal(err)
			}
			return q
		}, want: "not a gzip file"},
		{class: archive, name: "corrupt gzip trailer", mk: func(t *testing.T) string {
			return archiveOf(t, false, true, nil, func(b []byte) []byte { b[len(b)-5] ^= 0xff; return b })
		}, want: "corrupt gzip stream"},
		{class: archive, name: "trailing garbage after the gzip stream", mk: func(t *testing.T) string {
			return archiveOf(t, false, true, nil, func(b []byte) []byte { return append(b, []byte("garbage after the end")...) })
		}, accept: "one gzip member is read and its CRC checked; bytes after it are not part of the archive (block-padded transfers add zeros there)"},
		{class: archive, name: "empty archive", mk: func(t *testing.T) string { return archiveOf(t, true, true, nil, nil) },
			want: "holds no bundle.json"},
		{class: archive, name: "no bundle.json", mk: func(t *testing.T) string {
			return archiveOf(t, true, true, []entry{{h: tar.Header{Name: "readme.txt", Typeflag: tar.TypeReg}, data: []byte("hi")}}, nil)
		}, want: "holds no bundle.json"},

		// Manifest lies.
		{class: lies, name: "unknown key", mk: rawEdited(func(s string) string { return strings.Replace(s, `"model"`, `"modle": "x", "model"`, 1) }),
			want: `bundle.json: modle: unknown field (want one of format, model,`},
		{class: lies, name: "wrong format", mk: edited(func(m *bundle.Manifest) { m.Format = "tunefleet.bundle/v9" }), want: `bundle.json: format: is "tunefleet.bundle/v9", want "tunefleet.bundle/v1"`},
		{class: lies, name: "not JSON", mk: withFile(bundle.ManifestName, []byte("format: v1\n")), want: "invalid character"},
		{class: lies, name: "data after the JSON", mk: rawEdited(func(s string) string { return s + "{}" }), want: "unexpected data after"},
		{class: lies, name: "bad dtype", mk: edited(setDecl(func(d *bundle.TensorDecl) { d.DType = "float33" })), want: `bundle.json: graphs[0].inputs[0].dtype: is "float33", want "float32"`},
		{class: lies, name: "rank mismatch of min_shape", mk: edited(setDecl(func(d *bundle.TensorDecl) { d.Min = d.Min[:1] })), want: "rank"},
		{class: lies, name: "min above max", mk: edited(setDecl(func(d *bundle.TensorDecl) { d.Min[0] = 9 })), want: "min 9 and max 8"},
		{class: lies, name: "negative min", mk: edited(setDecl(func(d *bundle.TensorDecl) { d.Min[0] = -1 })), want: "bundle.json: graphs[0].inputs[0].min_shape[0]: is -1, want ≥ 0"},
		{class: lies, name: "negative static axis", mk: rawEdited(func(s string) string { return strings.Replace(s, `"batch0",`+"\n"+`            4`, `"batch0", -4`, 1) }),
			want: "negative"},
		{class: lies, name: "declared max 2^40", mk: edited(setDecl(func(d *bundle.TensorDecl) { d.Max[0] = 1 << 40 })), want: "limit"},
		{class: lies, name: "declared max 10^15", mk: edited(setDecl(func(d *bundle.TensorDecl) { d.Max[0] = 1e15 })), want: "limit"},
		{class: lies, name: "declared max 2^63-1", mk: edited(setDecl(func(d *bundle.TensorDecl) { d.Max[0] = math.MaxInt64 })), want: "limit"},
		{class: lies, name: "explicit batch max 2^40", mk: edited(explicit(batchDim(1, 1<<40), shapes.Dim{Size: 4})), want: "limit"},
		{class: lies, name: "explicit batch max 10^15", mk: edited(explicit(batchDim(1, 1e15), shapes.Dim{Size: 4})), want: "limit"},
		{class: lies, name: "explicit batch max 2^63-1", mk: edited(explicit(batchDim(1, math.MaxInt64), shapes.Dim{Size: 4})), want: "limit"},
		{class: lies, name: "explicit static size 2^40", mk: edited(explicit(batchDim(1, 8), shapes.Dim{Size: 1 << 40})), want: "limit"},
		{class: lies, name: "explicit batch 2^30: 16 GiB at the max", mk: edited(explicit(batchDim(1, 1<<30), shapes.Dim{Size: 4})), want: "limit per tensor"},
		{class: lies, name: "explicit min above max", mk: edited(explicit(batchDim(9, 8), shapes.Dim{Size: 4})), want: "must be below max"},
		{class: lies, name: "explicit dims of the wrong rank", mk: edited(explicit(batchDim(1, 8))), want: "has 1 dims"},
		{class: lies, name: "explicit dims of no input", mk: edited(func(m *bundle.Manifest) {
			m.DynamicShapes = shapes.DynamicShapes{"nosuch": {batchDim(1, 8)}}
		}), want: `"nosuch"`},
		{class: lies, name: "NaN tolerance", mk: rawEdited(func(s string) string {
			return strings.Replace(s, `"samples"`, `"tolerances": {"output": {"atol": NaN}}, "samples"`, 1)
		}), want: "invalid character"},
		{class: lies, name: "negative tolerance", mk: edited(func(m *bundle.Manifest) {
			v := -1.0
			m.Graphs[0].Tolerances = map[string]bundle.Tolerance{"output": {ATol: &v}}
		}), want: "bundle.json: graphs[0].tolerances.output.atol: is -1, want ≥ 0"},
		{class: lies, name: "tolerance of no output", mk: edited(func(m *bundle.Manifest) {
			v := 1.0
			m.Graphs[0].Tolerances = map[string]bundle.Tolerance{"nosuch": {ATol: &v}}
		}), want: `"nosuch"`},
		{class: lies, name: "duplicate graph names", mk: func(t *testing.T) string {
			dir := valid(t, bundletest.WithGraphs(bundletest.MLP, bundletest.TwoInputs))
			bundletest.EditManifest(t, dir, func(m *bundle.Manifest) { m.Graphs[1].Name = "0" })
			return dir
		}, want: "name is used twice"},
		{class: lies, name: "duplicate tensor names", mk: edited(func(m *bundle.Manifest) { m.Graphs[0].Outputs[0].Name = "input" }),
			want: `"input" is declared twice`},
		{class: lies, name: "model name too long for a store key", mk: edited(func(m *bundle.Manifest) { m.Model = strings.Repeat("m", 3000) }),
			want: "limit of 200 bytes"},
		{class: lies, name: "graph name too long for a store key", mk: edited(func(m *bundle.Manifest) { m.Graphs[0].Name = strings.Repeat("g", 5000) }),
			want: "limit of 200 bytes"},
		{class: lies, name: "model name with a slash", mk: edited(func(m *bundle.Manifest) { m.Model = "a/b" }), want: `bundle.json: model: is "a/b"; want at most 200 bytes of letters, digits and ._-()`},
		{class: lies, name: "empty model name", mk: edited(func(m *bundle.Manifest) { m.Model = "" }), want: `bundle.json: model: is ""; want`},
		{class: lies, name: "graph name that is a path", mk: edited(func(m *bundle.Manifest) { m.Graphs[0].Name = "../0" }), want: `bundle.json: graphs[0].name: is "../0"; want`},
		{class: lies, name: "onnx path escape", mk: edited(func(m *bundle.Manifest) { m.Graphs[0].ONNX = "../model.onnx" }), want: "escapes the bundle"},
		{class: lies, name: "onnx absolute path", mk: edited(func(m *bundle.Manifest) { m.Graphs[0].ONNX = "/etc/passwd" }), want: "is absolute"},
		{class: lies, name: "sample path escape", mk: edited(func(m *bundle.Manifest) { m.Graphs[0].Samples[0] = "../../samples" }), want: "escapes the bundle"},
		{class: lies, name: "onnx symlinked out of the bundle", mk: linkedOut(onnx0), want: "leads outside the bundle"},
		{class: lies, name: "sample directory symlinked out", mk: linkedOut(sample0), want: "leads outside the bundle"},
		{class: lies, name: "sample file symlinked out", mk: linkedOut(in0), want: "leads outside the bundle"},
		{class: lies, name: "no graphs", mk: edited(func(m *bundle.Manifest) { m.Graphs = nil }), want: "graphs is empty"},
		{class: lies, name: "no samples", mk: edited(func(m *bundle.Manifest) { m.Graphs[0].Samples = nil }), want: "no samples"},
		{class: lies, name: "bundle.json over 64 MiB", mk: rawEdited(func(s string) string {
			return strings.Replace(s, "{", "{"+strings.Repeat(" ", bundle.MaxManifestBytes), 1)
		}), want: "limit of 64 MiB"},
		{class: lies, name: "external_data that the ONNX file does not say", mk: edited(func(m *bundle.Manifest) {
			m.Graphs[0].ExternalData = []string{"0/test_data_set_0/input_0.pb"}
		}), want: "external_data lists"},
		{class: lies, name: "malformed aitune block", mk: rawEdited(func(s string) string {
			return strings.Replace(s, `"graphs"`, `"aitune": [1, 2], "graphs"`, 1)
		}), want: "aitune"},

		// ONNX lies.
		{class: onnxL, name: "truncated protobuf", mk: func(t *testing.T) string {
			dir := valid(t)
			p := filepath.Join(dir, onnx0)
			b := read(t, p)
			write(t, p, b[:len(b)-7])
			return dir
		}, want: "not an ONNX model"},
		{class: onnxL, name: "not protobuf", mk: withFile(onnx0, []byte("ir_version: 8\n")), want: "not an ONNX model"},
		{class: onnxL, name: "empty file", mk: withFile(onnx0, nil), want: "not an ONNX model"},
		{class: onnxL, name: "wrong input name", mk: model(onnxtest.MLP(bundletest.MLPIn, bundletest.MLPHidden, bundletest.MLPOut).
			Input("extra", f32, "N", 4)), want: "ONNX graph has 2"},
		{class: onnxL, name: "input named differently", mk: edited(func(m *bundle.Manifest) {
			m.Graphs[0].Inputs[0].Name = "x"
		}), want: `the ONNX graph's input 0 is "input"`},
		{class: onnxL, name: "wrong input dtype", mk: model(func() *onnxtest.Builder {
			b := onnxtest.New("mlp", 13)
			b.Input("input", onnxpb.TensorProto_DOUBLE, "N", 4).Output("output", f32, "N", 3)
			b.Node("Relu", []string{"input"}, []string{"output"})
			return b
		}()), want: "the ONNX graph says float64"},
		{class: onnxL, name: "wrong input rank", mk: model(func() *onnxtest.Builder {
			b := onnxtest.New("mlp", 13)
			b.Input("input", f32, "N", 4, 1).Output("output", f32, "N", 3)
			b.Node("Relu", []string{"input"}, []string{"output"})
			return b
		}()), want: "rank 3"},
		{class: onnxL, name: "static dim that disagrees", mk: model(func() *onnxtest.Builder {
			b := onnxtest.New("mlp", 13)
			b.Input("input", f32, "N", 5).Output("output", f32, "N", 3)
			b.Node("Relu", []string{"input"}, []string{"output"})
			return b
		}()), want: "axis 1 is 5 in the ONNX graph"},
		{class: onnxL, name: "no nodes", mk: model(func() *onnxtest.Builder {
			b := onnxtest.New("mlp", 13)
			b.Input("input", f32, "N", 4).Output("output", f32, "N", 3)
			return b
		}()), want: "has no nodes"},
		{class: onnxL, name: "external data ../", mk: externalized("../../../outside.bin", false), want: "escapes the bundle"},
		{class: onnxL, name: "external data /proc/self/environ", mk: externalized("/proc/self/environ", false), want: "is absolute"},
		{class: onnxL, name: "external data missing", mk: externalized("weights.bin", false), want: "does not exist"},
		{class: onnxL, name: "external data symlinked out", mk: func(t *testing.T) string {
			dir := externalized("weights.bin", false)(t)
			if err := os.Symlink(outside(t, make([]byte, 1024)), filepath.Join(dir, "0", "weights.bin")); err != nil {
				t.Fatal(err)
			}
			return dir
		}, want: "leads outside the bundle"},
		{class: onnxL, name: "external data is a directory", mk: func(t *testing.T) string {
			dir := externalized("weights", false)(t)
			if err := os.Mkdir(filepath.Join(dir, "0", "weights"), 0o755); err != nil {
				t.Fatal(err)
			}
			return dir
		}, want: "not a regular file"},

		// Sample lies.
		{class: sample, name: "wrong dtype", mk: withTensor(in0, bundle.Tensor{DType: bundle.Float64, Shape: []int64{1, 4}, Data: make([]byte, 32)}),
			want: "holds float64"},
		{class: sample, name: "wrong rank", mk: withTensor(in0, bundle.Tensor{DType: bundle.Float32, Shape: []int64{4}, Data: make([]byte, 16)}),
			want: "rank 1"},
		{class: sample, name: "batch beyond the declared max", mk: withTensor(in0, bundle.Tensor{DType: bundle.Float32, Shape: []int64{9, 4}, Data: make([]byte, 144)}),
			want: "outside the spec's [1, 8]"},
		{class: sample, name: "truncated raw_data", mk: func(t *testing.T) string {
			tp, _ := bundle.ToTensorProto(bundle.Tensor{DType: bundle.Float32, Shape: []int64{1, 4}, Data: make([]byte, 16)})
			tp.RawData = tp.RawData[:10]
			b, _ := protoMarshal(tp)
			return withFile(in0, b)(t)
		}, want: "truncated or corrupt"},
		{class: sample, name: "huge shape, tiny data", mk: func(t *testing.T) string {
			tp, _ := bundle.ToTensorProto(bundle.Tensor{DType: bundle.Float32, Shape: []int64{1, 4}, Data: make([]byte, 16)})
			tp.Dims = []int64{1 << 40, 1 << 40}
			b, _ := protoMarshal(tp)
			return withFile(in0, b)(t)
		}, want: "too large"},
		{class: sample, name: "oversized sample file (4 GiB sparse)", mk: bigSample, want: "more than a tensor may hold"},
		{class: sample, name: "not a TensorProto", mk: withFile(in0, []byte{0xff, 0xff, 0xff}), want: "not a serialized TensorProto"},
		{class: sample, name: "missing output", mk: func(t *testing.T) string {
			dir := valid(t)
			os.Remove(filepath.Join(dir, filepath.FromSlash(out0)))
			return dir
		}, want: "output_0.pb for output \"output\" is missing"},
		{class: sample, name: "missing input", mk: func(t *testing.T) string {
			dir := valid(t)
			os.Remove(filepath.Join(dir, filepath.FromSlash(in0)))
			return dir
		}, want: "input_0.pb for input \"input\" is missing"},
		{class: sample, name: "an input the graph does not have", mk: withTensor(sample0+"/input_1.pb", bundle.Tensor{DType: bundle.Float32, Shape: []int64{1, 4}, Data: make([]byte, 16)}),
			want: "input_1.pb has no matching input"},
		{class: sample, name: "sample with external data", mk: func(t *testing.T) string {
			tp, _ := bundle.ToTensorProto(bundle.Tensor{DType: bundle.Float32, Shape: []int64{1, 4}, Data: make([]byte, 16)})
			tp.RawData = nil
			tp.DataLocation = onnxpb.TensorProto_EXTERNAL.Enum()
			b, _ := protoMarshal(tp)
			return withFile(in0, b)(t)
		}, want: "external data is not supported in samples"},
		{class: sample, name: "sample directory missing", mk: edited(func(m *bundle.Manifest) { m.Graphs[0].Samples[0] = "0/nosuch" }),
			want: "does not exist"},

		// Fleet-scale bundles.
		{class: fleet, name: "10,001 graphs", mk: edited(repeatGraphs(bundle.MaxGraphs + 1)), want: "limit of 10000 per bundle"},
		{class: fleet, name: "10,001 samples in a graph", mk: edited(func(m *bundle.Manifest) {
			s := m.Graphs[0].Samples[0]
			m.Graphs[0].Samples = nil
			for range bundle.MaxSamples + 1 {
				m.Graphs[0].Samples = append(m.Graphs[0].Samples, s)
			}
		}), want: "limit of 10000 per graph"},
		{class: fleet, name: "1,001 inputs", mk: edited(func(m *bundle.Manifest) {
			for i := range bundle.MaxTensors {
				d := m.Graphs[0].Inputs[0]
				d.Name = fmt.Sprint("in", i)
				m.Graphs[0].Inputs = append(m.Graphs[0].Inputs, d)
			}
		}), want: "limit of 1000 per graph"},
		{class: fleet, name: "200 graphs", mk: edited(repeatGraphs(200)),
			accept: "within the limits (10,000 graphs); graphs may share files"},
		{class: fleet, name: "500 samples that are one directory", mk: edited(func(m *bundle.Manifest) {
			s := m.Graphs[0].Samples[0]
			for range 499 {
				m.Graphs[0].Samples = append(m.Graphs[0].Samples, s)
			}
		}), accept: "within the limits (10,000 samples, 16 GiB per graph); a repeated sample is run again, as AITune would"},
		{class: fleet, name: "unreferenced files beside the bundle", mk: withFile("notes/big.bin", bytes.Repeat([]byte("x"), 1<<20)),
			accept: "files bundle.json does not reference are neither digested, uploaded nor read"},
		{class: fleet, name: "symlink inside the bundle", mk: func(t *testing.T) string {
			dir := valid(t)
			p := filepath.Join(dir, filepath.FromSlash(in0))
			os.Rename(p, p+".real")
			if err := os.Symlink("input_0.pb.real", p); err != nil {
				t.Fatal(err)
			}
			return dir
		}, accept: "a link that resolves inside the bundle is its target's content (digested and uploaded as such)"},
	}
}

// TestHostileInputs runs every case through validate, embedded submit and
// worker tune: a refused case exits 2 with one line naming what to fix,
// and nothing is stored (the store directory stays absent) or written.
func TestHostileInputs(t *testing.T) {
	orttest.Need(t) // submit and tune check their ONNX Runtime candidates first
	type tally struct{ refused, accepted int }
	counts := map[string]*tally{}
	var mu sync.Mutex // counts, from the parallel cases
	count := func(class string, f func(*tally)) {
		mu.Lock()
		defer mu.Unlock()
		f(counts[class])
	}
	all := cases()
	// The tally runs once every case has ended: the cases are parallel
	// (each its own bundle, store and output directory), and t.Run
	// returns before a parallel subtest does.
	t.Cleanup(func() {
		classes := make([]string, 0, len(counts))
		for c := range counts {
			classes = append(classes, c)
		}
		sort.Strings(classes)
		total := 0
		for _, c := range classes {
			t.Logf("hostile inputs: %-20s %3d refused, %d accepted by policy", c, counts[c].refused, counts[c].accepted)
			total += counts[c].refused + counts[c].accepted
		}
		t.Logf("hostile inputs: %d cases", total)
	})
	for _, tc := range all {
		if counts[tc.class] == nil {
			counts[tc.class] = &tally{}
		}
		t.Run(tc.class+"/"+tc.name, func(t *testing.T) {
			t.Parallel()
			path := tc.mk(t)
			if tc.accept != "" {
				o := run(t, cli.NewProducer(), "bundle", "validate", path)
				if o.code != cli.ExitOK {
					t.Fatalf("accepted by policy (%s), but: %s", tc.accept, o)
				}
				count(tc.class, func(c *tally) { c.accepted++ })
				return
			}
			store := filepath.Join(t.TempDir(), "store")
			out := filepath.Join(t.TempDir(), "out")
			cmds := []struct {
				name string
				root func() *cobraCommand
				args []string
			}{
				{"producer", cli.NewProducer, []string{"bundle", "validate", path}},
				{"producer", cli.NewProducer, []string{"submit", path, "--target", "cpu", "--candidates", "ort:cpu:basic", "--store", "file://" + store}},
				{"worker", cli.NewWorker, []string{"tune", path, "--candidates", "ort:cpu:basic", "--out", out}},
			}
			for _, c := range cmds {
				o := run(t, c.root(), c.args...)
				if o.code != cli.ExitUsage {
					t.Errorf("%s %s: exit %d, want %d (bad input): %s", c.name, c.args[0], o.code, cli.ExitUsage, o)
					continue
				}
				if !strings.HasPrefix(o.stderr, c.name+": ") || strings.Count(o.stderr, "\n") != 1 || !strings.Contains(o.stderr, tc.want) {
					t.Errorf("%s %s: stderr is not one line %q...%q: %q", c.name, c.args[0], c.name+": ", tc.want, o.stderr)
				}
			}
			if entries, err := os.ReadDir(store); err == nil || !os.IsNotExist(err) {
				t.Errorf("a refused submit left a store: %v (%v)", entries, err)
			}
			if entries, _ := os.ReadDir(out); len(entries) > 0 {
				t.Errorf("a refused tune wrote %v", entries)
			}
			if !t.Failed() {
				count(tc.class, func(c *tally) { c.refused++ })
			}
		})
	}
	if len(all) < 70 {
		t.Errorf("%d cases, want at least 70", len(all))
	}
}
