package backend

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/x448/float16"

	"github.com/tunefleet/tunefleet/bundle"
)

// DefaultTolerance returns the absolute and relative tolerance the
// correctness check allows for a floating-point dtype unless the bundle
// overrides them: |got - want| ≤ atol + rtol·|want|. The values follow the
// precision of the type (float16 and bfloat16 engines legitimately differ in
// the second or third significant digit). Integer and bool outputs must match
// exactly, so they get 0, 0.
func DefaultTolerance(d bundle.DType) (atol, rtol float64) {
	switch d {
	case bundle.Float32:
		return 1e-4, 1e-3
	case bundle.Float64:
		return 1e-6, 1e-5
	case bundle.Float16:
		return 1e-2, 1e-2
	case bundle.BFloat16:
		return 5e-2, 5e-2
	}
	return 0, 0
}

// Check compares an engine's outputs with the reference outputs of one
// sample. got and want are in the same order; want's names are used in
// messages. Shapes and dtypes must be equal; floating-point elements must
// lie within the output's tolerance (tol, keyed by output name, overrides
// DefaultTolerance field by field), non-finite values must match in kind
// (NaN for NaN, the same infinity for an infinity), and integer and bool
// elements must be equal.
//
// Every disagreement is a *Failure of class FailWrongAnswer, op "check",
// with one message per failing output, the worst first, each naming the
// worst element so that whoever reads the result can see how wrong the
// engine is, not just that it is. A malformed reference tensor is the
// bundle's fault, not the engine's, and is returned as a plain error.
func Check(got, want []bundle.Tensor, tol map[string]bundle.Tolerance) error {
	if len(got) != len(want) {
		names := make([]string, len(want))
		for i, w := range want {
			names[i] = strconv.Quote(w.Name)
		}
		return Failf(FailWrongAnswer, "check", "engine returned %d outputs, want %d (%s)", len(got), len(want), strings.Join(names, ", "))
	}
	var fails []outputFailure
	for i := range want {
		w := &want[i]
		if err := w.Validate(); err != nil {
			return fmt.Errorf("reference output %d: %w", i, err)
		}
		if f, bad := checkOutput(&got[i], w, tol); bad {
			fails = append(fails, f)
		}
	}
	if len(fails) == 0 {
		return nil
	}
	// Worst first; the sort is stable so equally bad outputs keep their order.
	slices.SortStableFunc(fails, func(a, b outputFailure) int {
		switch {
		case a.severity > b.severity:
			return -1
		case a.severity < b.severity:
			return 1
		}
		return 0
	})
	msgs := make([]string, len(fails))
	for i, f := range fails {
		msgs[i] = f.msg
	}
	return Fail(FailWrongAnswer, "check", errors.New(strings.Join(msgs, "; ")))
}

// outputFailure is one failing output. severity orders failing outputs:
// structural and non-finite mismatches are +Inf, others the worst element's
// excess over its allowed error relative to that allowance, so outputs with
// different scales compare sensibly.
type outputFailure struct {
	msg      string
	severity float64
}

func checkOutput(g, w *bundle.Tensor, tol map[string]bundle.Tolerance) (outputFailure, bool) {
	inf := math.Inf(1)
	if g.DType != w.DType {
		return outputFailure{fmt.Sprintf("output %q: dtype %s, want %s", w.Name, g.DType, w.DType), inf}, true
	}
	if !slices.Equal(g.Shape, w.Shape) {
		return outputFailure{fmt.Sprintf("output %q: shape %v, want %v", w.Name, fmtShape(g.Shape), fmtShape(w.Shape)), inf}, true
	}
	if err := g.Validate(); err != nil {
		return outputFailure{fmt.Sprintf("output %q: malformed engine output: %v", w.Name, err), inf}, true
	}
	// Identical bytes are identical values (NaN payloads included), and this
	// is the common case for exact backends: skip decoding entirely.
	if bytes.Equal(g.Data, w.Data) {
		return outputFailure{}, false
	}
	if w.DType.IsFloat() {
		atol, rtol := Tolerance(w, tol)
		return checkFloats(g, w, atol, rtol)
	}
	return checkInts(g, w)
}

// Tolerance is what the check allows the reference output w: tol's entry
// for it (keyed by output name) over DefaultTolerance, field by field.
// Integer and bool outputs get 0, 0: they must match exactly.
func Tolerance(w *bundle.Tensor, tol map[string]bundle.Tolerance) (atol, rtol float64) {
	atol, rtol = DefaultTolerance(w.DType)
	if !w.DType.IsFloat() {
		return atol, rtol
	}
	if t, ok := tol[w.Name]; ok {
		if t.ATol != nil {
			atol = *t.ATol
		}
		if t.RTol != nil {
			rtol = *t.RTol
		}
	}
	return atol, rtol
}

// chunk is how many elements are decoded at a time into stack buffers: the
// check never allocates in proportion to the tensor size.
const chunk = 1024

func checkFloats(g, w *bundle.Tensor, atol, rtol float64) (outputFailure, bool) {
	n := w.Len()
	var (
		bad      int64
		worstAt  int64 = -1
		worstExc float64
		worstG   float64
		worstW   float64
		scale    float64 // the largest finite |want|: the output's own size
	)
	p := floatPairs{g: g, w: w}
	for start, gs, ws, ok := p.next(); ok; start, gs, ws, ok = p.next() {
		for j, wv := range ws {
			gv := gs[j]
			if a := math.Abs(wv); a > scale && !math.IsInf(a, 0) {
				scale = a
			}
			var exc float64
			switch {
			case gv == wv: // equal finite values and equal infinities
				continue
			case math.IsNaN(wv):
				if math.IsNaN(gv) {
					continue
				}
				exc = math.Inf(1)
			case math.IsInf(wv, 0) || math.IsNaN(gv) || math.IsInf(gv, 0):
				exc = math.Inf(1)
			default:
				d := math.Abs(gv - wv)
				bound := atol + rtol*math.Abs(wv)
				if d <= bound {
					continue
				}
				exc = d - bound
			}
			bad++
			if worstAt < 0 || exc > worstExc {
				worstAt, worstExc, worstG, worstW = start+int64(j), exc, gv, wv
			}
		}
	}
	if bad == 0 {
		return outputFailure{}, false
	}
	bits := 32
	if w.DType == bundle.Float64 {
		bits = 64
	}
	head := fmt.Sprintf("output %q: %d of %d elements out of tolerance; worst at %v: got %s, want %s",
		w.Name, bad, n, bundle.Index(w.Shape, worstAt), fmtFloat(worstG, bits), fmtFloat(worstW, bits))
	if math.IsInf(worstExc, 1) {
		return outputFailure{head + " (non-finite values must match exactly)", math.Inf(1)}, true
	}
	d := math.Abs(worstG - worstW)
	bound := atol + rtol*math.Abs(worstW)
	msg := fmt.Sprintf("%s (|diff| %.6g > %.6g = atol %.6g + rtol %.6g·|want|); %s", head, d, bound, atol, rtol, loosenHint(w.Name, d, worstW, scale))
	sev := math.Inf(1) // no allowance at all: any excess is infinitely bad
	if bound > 0 {
		sev = worstExc / bound
	}
	return outputFailure{msg, sev}, true
}

// wrongScale is how large a difference may be, against the output's own
// largest |value|, and still be offered a looser tolerance: past the
// output's own size the engine computes something else, and an atol that
// accepts it would accept almost any answer.
const wrongScale = 1.0

// loosenHint says how to accept a difference this large, if it is expected
// (a reduced-precision engine, a model that amplifies rounding): the
// smallest round atol or rtol that covers the worst element, and where it
// is given. A difference of the order of the outputs themselves gets no
// such advice: it is a wrong answer, not rounding.
func loosenHint(output string, diff, want, scale float64) string {
	if diff > wrongScale*scale {
		return fmt.Sprintf("the difference is of the order of the output itself (largest |want| %.6g): the engine computes "+
			"something else, which no tolerance should accept (a malformed export, a shape the tracer fixed, an operator "+
			"the engine implements differently)", scale)
	}
	hint := fmt.Sprintf("if this difference is acceptable, loosen the tolerance: --atol %s=%s", output, roundUp(diff))
	if want != 0 {
		hint += fmt.Sprintf(" or --rtol %s=%s", output, roundUp(diff/math.Abs(want)))
	}
	return hint + ` (producer bundle from-onnx, worker tune, producer submit; or "tolerances" in bundle.json)`
}

// roundUp rounds a positive value up to two significant digits.
func roundUp(v float64) string {
	if v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	e := math.Pow(10, math.Floor(math.Log10(v))-1)
	return strconv.FormatFloat(math.Ceil(v/e)*e, 'g', 2, 64)
}

// floatPairs walks two floating-point tensors of one dtype and length
// (an engine's output and its reference) a chunk at a time, decoded into
// its own buffers: the one decoding loop behind Check and MaxAbsErrors.
// It lives on its caller's stack, so a check never allocates in
// proportion to the tensor size.
type floatPairs struct {
	g, w   *bundle.Tensor
	done   int64 // elements decoded so far
	gb, wb [chunk]float64
}

// next decodes the next chunk: the index of its first element and got's
// and want's elements (valid until the next call); ok is false once every
// element was given.
func (p *floatPairs) next() (start int64, gs, ws []float64, ok bool) {
	n := p.w.Len()
	if p.done >= n {
		return 0, nil, nil, false
	}
	start = p.done
	m := min(n-start, chunk)
	size := int64(p.w.DType.Size())
	lo, hi := start*size, (start+m)*size
	gs, ws = p.gb[:m], p.wb[:m]
	decodeFloats(gs, p.w.DType, p.g.Data[lo:hi])
	decodeFloats(ws, p.w.DType, p.w.Data[lo:hi])
	p.done += m
	return start, gs, ws, true
}

// decodeFloats converts little-endian elements to float64 with one tight
// loop per dtype (the dtype switch is outside the loop).
func decodeFloats(dst []float64, d bundle.DType, b []byte) {
	switch d {
	case bundle.Float32:
		for i := range dst {
			dst[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
	case bundle.Float64:
		for i := range dst {
			dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
	case bundle.Float16:
		for i := range dst {
			dst[i] = float64(float16.Frombits(binary.LittleEndian.Uint16(b[2*i:])).Float32())
		}
	case bundle.BFloat16:
		for i := range dst {
			dst[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16))
		}
	default:
		panic("backend: decodeFloats on " + string(d))
	}
}

func checkInts(g, w *bundle.Tensor) (outputFailure, bool) {
	var gb, wb [chunk]uint64
	n := w.Len()
	size := int64(w.DType.Size())
	signed := isSigned(w.DType)
	var (
		bad     int64
		worstAt int64 = -1
		worstD  uint64
		worstG  uint64
		worstW  uint64
	)
	for start := int64(0); start < n; start += chunk {
		m := min(n-start, chunk)
		lo, hi := start*size, (start+m)*size
		gs, ws := gb[:m], wb[:m]
		decodeInts(gs, w.DType, g.Data[lo:hi])
		decodeInts(ws, w.DType, w.Data[lo:hi])
		for j, wv := range ws {
			gv := gs[j]
			if gv == wv {
				continue
			}
			// |gv - wv| as an unsigned number: exact for any pair of 64-bit
			// values of the same signedness, with no overflow.
			var d uint64
			if signed && int64(gv) > int64(wv) || !signed && gv > wv {
				d = gv - wv
			} else {
				d = wv - gv
			}
			bad++
			if worstAt < 0 || d > worstD {
				worstAt, worstD, worstG, worstW = start+int64(j), d, gv, wv
			}
		}
	}
	if bad == 0 {
		return outputFailure{}, false
	}
	what := "integers"
	if w.DType == bundle.Bool {
		what = "bools"
	}
	msg := fmt.Sprintf("output %q: %d of %d elements differ; worst at %v: got %s, want %s (%s must match exactly)",
		w.Name, bad, n, bundle.Index(w.Shape, worstAt), fmtInt(worstG, w.DType), fmtInt(worstW, w.DType), what)
	// Any wrong integer is as bad as a non-finite float: there is no
	// tolerance to be relative to.
	return outputFailure{msg, math.Inf(1)}, true
}

func isSigned(d bundle.DType) bool {
	return d == bundle.Int8 || d == bundle.Int16 || d == bundle.Int32 || d == bundle.Int64
}

// decodeInts widens integer and bool elements to 64 bits: signed types are
// sign-extended (and compared as int64), unsigned zero-extended, bools
// normalised to 0/1 so that any non-zero byte means true.
func decodeInts(dst []uint64, d bundle.DType, b []byte) {
	switch d {
	case bundle.Int8:
		for i := range dst {
			dst[i] = uint64(int64(int8(b[i])))
		}
	case bundle.Uint8:
		for i := range dst {
			dst[i] = uint64(b[i])
		}
	case bundle.Bool:
		for i := range dst {
			if b[i] != 0 {
				dst[i] = 1
			} else {
				dst[i] = 0
			}
		}
	case bundle.Int16:
		for i := range dst {
			dst[i] = uint64(int64(int16(binary.LittleEndian.Uint16(b[2*i:]))))
		}
	case bundle.Uint16:
		for i := range dst {
			dst[i] = uint64(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case bundle.Int32:
		for i := range dst {
			dst[i] = uint64(int64(int32(binary.LittleEndian.Uint32(b[4*i:]))))
		}
	case bundle.Uint32:
		for i := range dst {
			dst[i] = uint64(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case bundle.Int64, bundle.Uint64:
		for i := range dst {
			dst[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
	default:
		panic("backend: decodeInts on " + string(d))
	}
}

// fmtFloat prints the shortest representation that round-trips at the
// element's precision (float16 and bfloat16 values are exact float32s), so
// 1.1 in a float32 tensor prints as 1.1, not 1.100000023841858.
func fmtFloat(v float64, bits int) string {
	return strconv.FormatFloat(v, 'g', -1, bits)
}

func fmtInt(v uint64, d bundle.DType) string {
	switch {
	case d == bundle.Bool:
		return strconv.FormatBool(v != 0)
	case isSigned(d):
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatUint(v, 10)
}

// fmtShape prints a shape as [2 3], and a scalar's empty shape as
// "[] (scalar)" so that a rank mismatch against a scalar is obvious.
func fmtShape(s []int64) string {
	if len(s) == 0 {
		return "[] (scalar)"
	}
	return fmt.Sprint(s)
}

// MaxAbsErrors gives, per reference output, the largest absolute difference
// between got and want, for the build log's record of a check ("" for an
// output that cannot be compared element by element: a dtype or shape
// mismatch, or a non-float output that differs). NaN where both are NaN
// and equal infinities count as no difference.
func MaxAbsErrors(got, want []bundle.Tensor) []string {
	out := make([]string, len(want))
	for i := range want {
		if i >= len(got) {
			continue
		}
		if d, ok := MaxAbsError(&got[i], &want[i]); ok {
			out[i] = strconv.FormatFloat(d, 'g', 4, 64)
		}
	}
	return out
}

// MaxAbsError is the largest |got - want| over the elements of one output
// (+Inf where a non-finite value differs; NaN against NaN and equal
// infinities are no difference); ok is false when the two cannot be
// compared element by element: a dtype or shape mismatch, a malformed
// tensor, or a non-float output that differs.
func MaxAbsError(g, w *bundle.Tensor) (float64, bool) {
	if g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) || w.Validate() != nil || g.Validate() != nil {
		return 0, false
	}
	if bytes.Equal(g.Data, w.Data) {
		return 0, true
	}
	if !w.DType.IsFloat() {
		return 0, false
	}
	worst := 0.0
	p := floatPairs{g: g, w: w}
	for _, gs, ws, ok := p.next(); ok; _, gs, ws, ok = p.next() {
		for j, wv := range ws {
			gv := gs[j]
			switch {
			case gv == wv, math.IsNaN(gv) && math.IsNaN(wv):
			case math.IsNaN(gv) || math.IsNaN(wv) || math.IsInf(gv, 0) || math.IsInf(wv, 0):
				worst = math.Inf(1)
			default:
				worst = max(worst, math.Abs(gv-wv))
			}
		}
	}
	return worst, true
}
