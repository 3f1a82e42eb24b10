package scalebench

import (
	"bufio"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
)

// bigBundle writes a one-graph bundle (bundletest's MLP) whose ONNX model
// also carries inlineMiB of initializer inside model.onnx and extMiB in an
// external-data file beside it, streamed to disk a MiB at a time: nothing
// of the model is ever in this process's memory. The extra initializers
// are unused by the graph, so the bundle's declared inputs, outputs and
// samples stay valid. Either size may be 0.
func bigBundle(tb testing.TB, inlineMiB, extMiB int64) string {
	tb.Helper()
	dir := bundletest.Write(tb, bundletest.WithModel("sb.big"))
	onnx := filepath.Join(dir, filepath.FromSlash(bundletest.ONNXPath("0")))
	f, err := os.OpenFile(onnx, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	// Protobuf merges a repeated occurrence of an embedded message field,
	// so appending "graph { initializer { … } }" to a serialized
	// ModelProto adds an initializer to its graph, without reading it.
	if inlineMiB > 0 {
		appendInitializer(tb, w, "sb_pad_inline", inlineMiB<<20, "")
	}
	if extMiB > 0 {
		const loc = "sb_pad.bin"
		appendInitializer(tb, w, "sb_pad_external", extMiB<<20, loc)
		writeData(tb, filepath.Join(filepath.Dir(onnx), loc), extMiB<<20)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// appendInitializer writes ModelProto.graph(7).initializer(5) = a uint8
// TensorProto of size bytes: raw_data inline, or its external_data
// location when loc is set.
func appendInitializer(tb testing.TB, w *bufio.Writer, name string, size int64, loc string) {
	var t []byte
	t = protowire.AppendTag(t, 1, protowire.VarintType) // dims
	t = protowire.AppendVarint(t, uint64(size))
	t = protowire.AppendTag(t, 2, protowire.VarintType) // data_type: UINT8
	t = protowire.AppendVarint(t, 2)
	t = protowire.AppendTag(t, 8, protowire.BytesType) // name
	t = protowire.AppendString(t, name)
	tensorLen := uint64(len(t))
	if loc != "" {
		entry := func(k, v string) []byte {
			var e []byte
			e = protowire.AppendTag(e, 1, protowire.BytesType)
			e = protowire.AppendString(e, k)
			e = protowire.AppendTag(e, 2, protowire.BytesType)
			return protowire.AppendString(e, v)
		}
		for _, kv := range [][2]string{{"location", loc}, {"offset", "0"}, {"length", itoa(size)}} {
			t = protowire.AppendTag(t, 13, protowire.BytesType) // external_data
			t = protowire.AppendBytes(t, entry(kv[0], kv[1]))
		}
		t = protowire.AppendTag(t, 14, protowire.VarintType) // data_location: EXTERNAL
		t = protowire.AppendVarint(t, 1)
		tensorLen = uint64(len(t))
	} else {
		tensorLen += uint64(protowire.SizeTag(9)+protowire.SizeVarint(uint64(size))) + uint64(size)
	}
	graphLen := uint64(protowire.SizeTag(5)+protowire.SizeVarint(tensorLen)) + tensorLen
	var h []byte
	h = protowire.AppendTag(h, 7, protowire.BytesType) // ModelProto.graph
	h = protowire.AppendVarint(h, graphLen)
	h = protowire.AppendTag(h, 5, protowire.BytesType) // GraphProto.initializer
	h = protowire.AppendVarint(h, tensorLen)
	h = append(h, t...)
	if loc == "" {
		h = protowire.AppendTag(h, 9, protowire.BytesType) // raw_data
		h = protowire.AppendVarint(h, uint64(size))
	}
	if _, err := w.Write(h); err != nil {
		tb.Fatal(err)
	}
	if loc == "" {
		streamBytes(tb, w, size)
	}
}

// writeData writes an external-data file of size bytes.
func writeData(tb testing.TB, path string, size int64) {
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	streamBytes(tb, w, size)
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// streamBytes writes size pseudo-random bytes (one random MiB, repeated
// with a changing first word: incompressible enough, and fast).
func streamBytes(tb testing.TB, w *bufio.Writer, size int64) {
	block := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range block {
		block[i] = byte(r.Uint32())
	}
	for off := int64(0); off < size; off += int64(len(block)) {
		block[0], block[1], block[2], block[3] = byte(off>>20), byte(off>>28), byte(off>>36), byte(off>>44)
		n := min(int64(len(block)), size-off)
		if _, err := w.Write(block[:n]); err != nil {
			tb.Fatal(err)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
