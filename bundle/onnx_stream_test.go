package bundle

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
)

// sameParse fails t unless the streaming decoder, over a file and over a
// byte slice, answers exactly as the byte-slice reference does.
func sameParse(t *testing.T, what string, b []byte) {
	t.Helper()
	want, werr := refParseGraphIO(b)
	got, gerr := ParseGraphIO(b)
	got.ExternalSizes = nil // the reference does not size external data
	if !reflect.DeepEqual(got, want) || (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		t.Errorf("%s: streaming %+v (%v), reference %+v (%v)", what, got, gerr, want, werr)
	}
}

func corpusRoot(t *testing.T) string {
	t.Helper()
	for _, dir := range []string{os.Getenv("TUNEFLEET_ONNX_TESTDATA"), "/usr/share/libonnx-testdata/data"} {
		if dir != "" {
			if _, err := os.Stat(filepath.Join(dir, "node")); err == nil {
				return dir
			}
		}
	}
	// -short runs what needs no corpus, in CI too (make test-short).
	if os.Getenv("CI") != "" && !testing.Short() {
		t.Fatal("ONNX test corpus not found (run `make testdata`)")
	}
	t.Skip("ONNX test corpus not found (run `make testdata` or install libonnx-testdata)")
	return ""
}

// The streaming decoder gives the reference's results and errors on every
// model of the corpus, whole, cut short at several points, and with a
// byte damaged at several points: the damaged copies reach every error
// path of the wire walk (truncated varints and lengths, bad field numbers,
// reserved wire types, stray end groups).
func TestStreamingDecoderAgreesWithReference(t *testing.T) {
	root := corpusRoot(t)
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".onnx") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sameParse(t, p, b)
		fromFile, ferr := ReadGraphIO(p)
		fromFile.ExternalSizes = nil
		if want, werr := refParseGraphIO(b); !reflect.DeepEqual(fromFile, want) || (ferr == nil) != (werr == nil) {
			t.Errorf("%s: from the file %+v (%v), reference %+v (%v)", p, fromFile, ferr, want, werr)
		}
		for _, frac := range []int{2, 3, 5, 7, 11} {
			cut := len(b) * (frac - 1) / frac
			sameParse(t, p+" cut", b[:cut])
			for _, v := range []byte{0x00, 0xff, 0x07, 0x0c, 0x80} {
				c := append([]byte(nil), b...)
				c[len(b)/frac] = v
				sameParse(t, p+" damaged", c)
			}
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 1000 {
		t.Fatalf("only %d models compared", n)
	}
}

// Hand-made wire damage the corpus may not reach, each checked against the
// reference.
func TestStreamingDecoderWireEdgeCases(t *testing.T) {
	model := onnxtest.MLP(4, 8, 3).Bytes()
	tag := func(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	group := func(num protowire.Number, inner ...[]byte) []byte {
		return cat(tag(num, protowire.StartGroupType), cat(inner...), tag(num, protowire.EndGroupType))
	}
	deep := tag(3, protowire.StartGroupType)
	for range 10_002 {
		deep = append(deep, tag(3, protowire.StartGroupType)...)
	}
	cases := map[string][]byte{
		"empty":                 {},
		"varint overflow":       cat(model, []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}),
		"field number 0":        cat([]byte{0x00}, model),
		"reserved wire type":    cat(model, []byte{0x0e}),
		"stray end group":       cat(model, tag(9, protowire.EndGroupType)),
		"group":                 cat(group(30, tag(1, protowire.VarintType), []byte{1}), model),
		"group wrong end":       cat(tag(30, protowire.StartGroupType), tag(31, protowire.EndGroupType), model),
		"group unterminated":    cat(model, tag(30, protowire.StartGroupType)),
		"groups too deep":       cat(model, deep),
		"fixed32 short":         cat(model, tag(30, protowire.Fixed32Type), []byte{1, 2}),
		"fixed64":               cat(tag(30, protowire.Fixed64Type), make([]byte, 8), model),
		"length past the end":   cat(model, tag(30, protowire.BytesType), []byte{0x10, 1}),
		"tag cut in a varint":   cat(model, []byte{0x80}),
		"graph twice":           cat(model, model),
		"unknown bytes field":   cat(tag(40, protowire.BytesType), protowire.AppendBytes(nil, make([]byte, 200_000)), model),
		"ir_version not varint": cat(tag(1, protowire.BytesType), []byte{0}, model),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) { sameParse(t, name, b) })
	}
}

// A file that cannot be read is reported as a read error, not as a
// damaged model.
func TestStreamingDecoderReadError(t *testing.T) {
	model := onnxtest.MLP(4, 8, 3).Bytes()
	boom := errors.New("disk on fire")
	_, err := decodeGraphIO(readerAtFunc(func(p []byte, off int64) (int, error) { return 0, boom }), int64(len(model)))
	if !errors.Is(err, boom) || strings.Contains(err.Error(), "not an ONNX model") {
		t.Fatalf("got %v, want the read error without \"not an ONNX model\"", err)
	}
	// A file shorter than its size said (it shrank while read).
	_, err = decodeGraphIO(readerAtFunc(func(p []byte, off int64) (int, error) {
		if off >= int64(len(model)/2) {
			return 0, nil
		}
		return copy(p, model[off:len(model)/2]), nil
	}), int64(len(model)))
	if err == nil || strings.Contains(err.Error(), "not an ONNX model") {
		t.Fatalf("got %v, want a read error", err)
	}
}

type readerAtFunc func(p []byte, off int64) (int, error)

func (f readerAtFunc) ReadAt(p []byte, off int64) (int, error) { return f(p, off) }

func FuzzStreamingAgreesWithReference(f *testing.F) {
	for _, b := range []*onnxtest.Builder{onnxtest.MLP(4, 8, 3), onnxtest.TwoInputs(), onnxtest.ConvNet()} {
		data := b.Bytes()
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameParse(t, "fuzz", data) })
}
