package bundle

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of onnx.proto that externalLocations reads.
const (
	modelFunctions         = 25
	functionNode           = 7
	graphSparseInitializer = 15
	nodeAttribute          = 5
	attrTensor             = 5
	attrGraph              = 6
	attrTensors            = 10
	attrGraphs             = 11
	attrSparseTensor       = 22
	attrSparseTensors      = 23
	sparseValues           = 1
	sparseIndices          = 2
	tensorExternalData     = 13
	stringStringKey        = 1
	stringStringValue      = 2
	maxExternalScanNesting = 64
	externalLocationKey    = "location"
	tensorDims             = 1
	tensorDataType         = 2
)

// extScan collects the external-data locations of a model as leanModel
// walks it, as written, deduplicated, in order of first use: those of the
// graph's initializers (sparse ones too), of tensors in node attributes
// (Constant and the like) and of the subgraphs and functions they nest.
// Only the tags are walked; tensor values are skipped in place. Nesting
// deeper than maxExternalScanNesting is refused, so a hostile file cannot
// exhaust the stack. The first damage it meets is kept in err and ends the
// scan (not the walk of the graph's inputs and outputs, which reports its
// own problems first).
type extScan struct {
	out  []string
	seen map[string]bool
	// need holds, per location, the bytes its tensors' offsets and lengths
	// say it holds at least (see tensorExtent).
	need map[string]int64
	err  error
	// domains counts the main graph's nodes by domain (GraphIO.NodeDomains),
	// gathered in the same pass.
	domains map[string]int
}

func newExtScan() *extScan { return &extScan{seen: map[string]bool{}, need: map[string]int64{}} }

// tensorExtent is what a TensorProto says of where its external data is:
// its location, offset and length entries, and its dims and data type, for
// a length the entries leave out (ONNX then reads the tensor's size).
type tensorExtent struct {
	dims           []int64
	dtype          int32
	loc            string
	hasLoc         bool
	offset, length int64
	hasLength      bool
}

// field records a field of the TensorProto walked; it never fails, since
// what it reads only sizes the check of the file (damage the reference
// walk ignores is ignored here too).
func (te *tensorExtent) field(w *wireReader, f field) {
	switch {
	case f.num == tensorDims && f.typ == protowire.VarintType:
		te.dims = append(te.dims, int64(f.x))
	case f.num == tensorDims && f.typ == protowire.BytesType && f.end-f.at <= maxWireField:
		if b, err := w.bytes(f); err == nil {
			for len(b) > 0 {
				x, n := protowire.ConsumeVarint(b)
				if n < 0 {
					break
				}
				te.dims, b = append(te.dims, int64(x)), b[n:]
			}
		}
	case f.num == tensorDataType && f.typ == protowire.VarintType:
		te.dtype = int32(f.x)
	}
}

func (te *tensorExtent) entry(key, value string) {
	switch key {
	case externalLocationKey:
		te.loc, te.hasLoc = value, true
	case "offset":
		te.offset, _ = strconv.ParseInt(value, 10, 64)
	case "length":
		var err error
		te.length, err = strconv.ParseInt(value, 10, 64)
		te.hasLength = err == nil
	}
}

// done adds the tensor's extent to what its location must hold. Values
// that make no sense (negative, overflowing) are left to ONNX Runtime,
// which refuses them when it builds.
func (e *extScan) done(te *tensorExtent) {
	if !te.hasLoc || te.offset < 0 {
		return
	}
	n := te.length
	if !te.hasLength {
		dt, err := DTypeFromONNX(te.dtype)
		if err != nil || dt.Size() == 0 {
			return
		}
		var ok bool
		if n, ok = boundedProduct(te.dims, int64(dt.Size()), math.MaxInt64/2); !ok {
			return
		}
	}
	if n < 0 || te.offset > math.MaxInt64/2 || n > math.MaxInt64/2 {
		return
	}
	e.need[te.loc] = max(e.need[te.loc], te.offset+n)
}

func (e *extScan) add(loc string) {
	if !e.seen[loc] {
		e.seen[loc] = true
		e.out = append(e.out, loc)
	}
}

// run runs one scan step unless the scan has already failed.
func (e *extScan) run(step func() error) {
	if e.err == nil {
		e.err = step()
	}
}

// eachBytes calls fn for every length-delimited field of a message.
func eachBytes(w *wireReader, m field, fn func(f field) error) error {
	return w.eachField(m.at, m.end, func(f field) error {
		if f.typ != protowire.BytesType {
			return nil
		}
		return fn(f)
	})
}

func (e *extScan) functions(w *wireReader, fn field) {
	e.run(func() error {
		return eachBytes(w, fn, func(f field) error {
			if f.num == functionNode {
				return e.scanNode(w, f, 0)
			}
			return nil
		})
	})
}

func (e *extScan) node(w *wireReader, n field, depth int) {
	e.run(func() error { return e.scanNode(w, n, depth) })
}

func (e *extScan) sparse(w *wireReader, s field) {
	e.run(func() error { return e.scanSparse(w, s) })
}

func (e *extScan) entry(w *wireReader, s field, te *tensorExtent) {
	e.run(func() error { return e.scanEntry(w, s, te) })
}

func (e *extScan) scanGraph(w *wireReader, g field, depth int) error {
	if depth > maxExternalScanNesting {
		return fmt.Errorf("subgraphs nested more than %d deep", maxExternalScanNesting)
	}
	return eachBytes(w, g, func(f field) error {
		switch f.num {
		case graphInitializer:
			return e.scanTensor(w, f)
		case graphSparseInitializer:
			return e.scanSparse(w, f)
		case graphNode:
			return e.scanNode(w, f, depth)
		}
		return nil
	})
}

func (e *extScan) scanNode(w *wireReader, n field, depth int) error {
	return eachBytes(w, n, func(f field) error {
		if f.num != nodeAttribute {
			return nil
		}
		return eachBytes(w, f, func(f field) error {
			switch f.num {
			case attrTensor, attrTensors:
				return e.scanTensor(w, f)
			case attrSparseTensor, attrSparseTensors:
				return e.scanSparse(w, f)
			case attrGraph, attrGraphs:
				return e.scanGraph(w, f, depth+1)
			}
			return nil
		})
	})
}

func (e *extScan) scanSparse(w *wireReader, s field) error {
	return eachBytes(w, s, func(f field) error {
		if f.num == sparseValues || f.num == sparseIndices {
			return e.scanTensor(w, f)
		}
		return nil
	})
}

// scanTensor adds a TensorProto's external-data location. Its
// data_location is not consulted: a location is a path a reader may
// follow, whatever the flag says, so every one is checked.
func (e *extScan) scanTensor(w *wireReader, t field) error {
	var te tensorExtent
	err := w.eachField(t.at, t.end, func(f field) error {
		if f.num != tensorExternalData || f.typ != protowire.BytesType {
			te.field(w, f)
			return nil
		}
		return e.scanEntry(w, f, &te)
	})
	if err == nil {
		e.done(&te)
	}
	return err
}

// scanEntry adds the value of a StringStringEntryProto of a tensor's
// external_data whose key is "location".
func (e *extScan) scanEntry(w *wireReader, s field, te *tensorExtent) error {
	var key, value string
	err := eachBytes(w, s, func(f field) error {
		if f.num != stringStringKey && f.num != stringStringValue {
			return nil
		}
		v, err := w.bytes(f)
		if err != nil {
			return err
		}
		if f.num == stringStringKey {
			key = string(v)
		} else {
			value = string(v)
		}
		return nil
	})
	if err == nil {
		te.entry(key, value)
		if key == externalLocationKey {
			e.add(value)
		}
	}
	return err
}

// resolveExternal checks the external-data locations of the ONNX file at
// the bundle-relative path onnxRel and returns them as bundle-relative
// paths, sorted. ONNX resolves a location against the ONNX file's
// directory; one that is absolute, climbs with "..", leaves the bundle
// through a symbolic link, or is not a regular file in the bundle is
// refused, since a worker must read nothing but the bundle (a location of
// /proc/self/environ would hand a reader the worker's secrets).
func resolveExternal(b *Bundle, onnxRel string, locs []string) ([]string, []string) {
	var out, probs []string
	base := path.Dir(clean(onnxRel))
	for _, loc := range locs {
		bad := func(format string, args ...any) {
			probs = append(probs, fmt.Sprintf("onnx %q: external data location %q ", onnxRel, loc)+fmt.Sprintf(format, args...))
		}
		switch {
		case loc == "":
			bad("is empty")
			continue
		case strings.HasPrefix(loc, "/") || path.IsAbs(loc):
			bad("is absolute; external data must be a file beside the ONNX file, inside the bundle")
			continue
		case strings.ContainsAny(loc, "\\\x00"):
			bad("contains a backslash or NUL; use '/' separators")
			continue
		case slices.Contains(strings.Split(loc, "/"), ".."):
			bad("escapes the bundle (contains \"..\")")
			continue
		}
		rel := clean(path.Join(base, loc))
		p, err := b.resolve(rel)
		if err != nil {
			bad("(%s): %v", rel, err)
			continue
		}
		if fi, err := os.Stat(p); err != nil {
			bad("(%s): %v", rel, err)
			continue
		} else if !fi.Mode().IsRegular() {
			bad("(%s) is not a regular file", rel)
			continue
		}
		out = append(out, rel)
	}
	slices.Sort(out)
	return slices.Compact(out), probs
}

// checkExternalSizes refuses external-data files shorter than the model's
// tensors say (a copy cut short): found at validation, in words that name
// the file, instead of by ONNX Runtime in a worker. Locations were checked
// by resolveExternal.
func checkExternalSizes(b *Bundle, onnxRel string, need map[string]int64) []string {
	var probs []string
	base := path.Dir(clean(onnxRel))
	for _, loc := range slices.Sorted(maps.Keys(need)) {
		rel := clean(path.Join(base, loc))
		p, err := b.resolve(rel)
		if err != nil {
			continue // reported by resolveExternal
		}
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if fi.Size() < need[loc] {
			probs = append(probs, fmt.Sprintf("onnx %q: external data file %q holds %d bytes, but the model's tensors need %d (truncated or wrong file?)", onnxRel, rel, fi.Size(), need[loc]))
		}
	}
	return probs
}
