package backend

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/tunefleet/tunefleet/bundle"
)

func f32(name string, shape []int64, vals ...float32) bundle.Tensor {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return bundle.Tensor{Name: name, DType: bundle.Float32, Shape: shape, Data: b}
}

// f32bits builds a float32 tensor from raw bit patterns (for NaN payloads).
func f32bits(name string, shape []int64, bits ...uint32) bundle.Tensor {
	b := make([]byte, 4*len(bits))
	for i, v := range bits {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return bundle.Tensor{Name: name, DType: bundle.Float32, Shape: shape, Data: b}
}

func f64(name string, shape []int64, vals ...float64) bundle.Tensor {
	b := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return bundle.Tensor{Name: name, DType: bundle.Float64, Shape: shape, Data: b}
}

func f16(name string, shape []int64, vals ...float32) bundle.Tensor {
	b := make([]byte, 2*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint16(b[2*i:], float16.Fromfloat32(v).Bits())
	}
	return bundle.Tensor{Name: name, DType: bundle.Float16, Shape: shape, Data: b}
}

// bf16 truncates to the top 16 bits of the float32 (the test values are
// exactly representable, so truncation and rounding agree).
func bf16(name string, shape []int64, vals ...float32) bundle.Tensor {
	b := make([]byte, 2*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(v)>>16))
	}
	return bundle.Tensor{Name: name, DType: bundle.BFloat16, Shape: shape, Data: b}
}

func i64(name string, shape []int64, vals ...int64) bundle.Tensor {
	b := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return bundle.Tensor{Name: name, DType: bundle.Int64, Shape: shape, Data: b}
}

func u64(name string, shape []int64, vals ...uint64) bundle.Tensor {
	b := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
	return bundle.Tensor{Name: name, DType: bundle.Uint64, Shape: shape, Data: b}
}

func i32(name string, shape []int64, vals ...int32) bundle.Tensor {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return bundle.Tensor{Name: name, DType: bundle.Int32, Shape: shape, Data: b}
}

func boolT(name string, shape []int64, vals ...byte) bundle.Tensor {
	return bundle.Tensor{Name: name, DType: bundle.Bool, Shape: shape, Data: append([]byte(nil), vals...)}
}

func ptr(v float64) *float64 { return &v }

func ones(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

func TestCheck(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	s23 := []int64{2, 3}
	big := func(set map[int]float32) []float32 {
		v := ones(3000)
		for k, x := range set {
			v[k] = x
		}
		return v
	}
	tests := []struct {
		name string
		got  []bundle.Tensor
		want []bundle.Tensor
		tol  map[string]bundle.Tolerance
		// wantMsg lists substrings the error must contain, in order; nil means
		// Check must pass.
		wantMsg []string
		// notFailure: the error must not be a *Failure (the bundle's fault).
		notFailure bool
	}{
		{
			name: "exact match",
			got:  []bundle.Tensor{f32("logits", s23, 1, 2, 3, 4, 5, 6), i64("ids", []int64{2}, 7, 8)},
			want: []bundle.Tensor{f32("logits", s23, 1, 2, 3, 4, 5, 6), i64("ids", []int64{2}, 7, 8)},
		},
		{
			name: "beyond tolerance names the worst element",
			got:  []bundle.Tensor{f32("logits", s23, 1, 1.01, 1, 1, 1, 1.25)},
			want: []bundle.Tensor{f32("logits", s23, ones(6)...)},
			wantMsg: []string{`output "logits": 2 of 6 elements out of tolerance; worst at [1 2]: got 1.25, want 1 ` +
				`(|diff| 0.25 > 0.0011 = atol 0.0001 + rtol 0.001·|want|)`,
				// and how to accept it, if it is expected
				`loosen the tolerance: --atol logits=0.25 or --rtol logits=0.25 (producer bundle from-onnx, worker tune, producer submit`},
		},
		{
			name: "a difference of the order of the output gets no tolerance advice",
			got:  []bundle.Tensor{f32("output_0", []int64{3}, 0.35, -0.3, 0.1)},
			want: []bundle.Tensor{f32("output_0", []int64{3}, -0.35, 0.3, 0.1)},
			wantMsg: []string{`output "output_0": 2 of 3 elements out of tolerance; worst at [0]`,
				`the difference is of the order of the output itself (largest |want| 0.35): the engine computes something else`},
		},
		{
			name: "worst is the largest excess, not the largest difference",
			// |diff| at [0] is 1.05 but its bound is 1.0001; at [1] 0.2 over 0.0011.
			got:     []bundle.Tensor{f32("y", []int64{2}, 1001.05, 1.2)},
			want:    []bundle.Tensor{f32("y", []int64{2}, 1000, 1)},
			wantMsg: []string{`2 of 2 elements out of tolerance; worst at [1]: got 1.2, want 1 `},
		},
		{
			name: "within tolerance",
			got:  []bundle.Tensor{f32("logits", s23, 1.001, 0.999, 1, 1, 1.0005, 1)},
			want: []bundle.Tensor{f32("logits", s23, ones(6)...)},
		},
		{
			name: "within relative tolerance of a large value",
			got:  []bundle.Tensor{f32("x", []int64{1}, 1000.9)},
			want: []bundle.Tensor{f32("x", []int64{1}, 1000)},
		},
		{
			name: "override loosens",
			got:  []bundle.Tensor{f32("logits", s23, 1, 1.01, 1, 1, 1, 1.25)},
			want: []bundle.Tensor{f32("logits", s23, ones(6)...)},
			tol:  map[string]bundle.Tolerance{"logits": {ATol: ptr(0.3)}},
		},
		{
			name: "override tightens, other field keeps its default",
			// 0.00105 passes the default bound 0.0011 but not 0 + 0.001.
			got:     []bundle.Tensor{f32("logits", []int64{2}, 1.00105, 1)},
			want:    []bundle.Tensor{f32("logits", []int64{2}, 1, 1)},
			tol:     map[string]bundle.Tolerance{"logits": {ATol: ptr(0)}},
			wantMsg: []string{`1 of 2 elements`, `worst at [0]`, `= atol 0 + rtol 0.001·|want|)`},
		},
		{
			name:    "override of rtol only",
			got:     []bundle.Tensor{f32("logits", []int64{2}, 1.0005, 1)},
			want:    []bundle.Tensor{f32("logits", []int64{2}, 1, 1)},
			tol:     map[string]bundle.Tolerance{"logits": {RTol: ptr(1e-5)}},
			wantMsg: []string{`= atol 0.0001 + rtol 1e-05·|want|)`},
		},
		{
			name:    "override of another output does not apply",
			got:     []bundle.Tensor{f32("logits", []int64{1}, 1.25)},
			want:    []bundle.Tensor{f32("logits", []int64{1}, 1)},
			tol:     map[string]bundle.Tolerance{"other": {ATol: ptr(1)}},
			wantMsg: []string{`output "logits": 1 of 1 elements`},
		},
		{
			name:    "NaN in got",
			got:     []bundle.Tensor{f32("p", s23, 1, 1, nan, 1, 1, 1.5)},
			want:    []bundle.Tensor{f32("p", s23, ones(6)...)},
			wantMsg: []string{`output "p": 2 of 6 elements out of tolerance; worst at [0 2]: got NaN, want 1 (non-finite values must match exactly)`},
		},
		{
			name: "NaN in both (different payloads) passes",
			got:  []bundle.Tensor{f32bits("p", []int64{2}, 0x7fc00001, math.Float32bits(1.0001))},
			want: []bundle.Tensor{f32bits("p", []int64{2}, 0x7fc00000, math.Float32bits(1))},
		},
		{
			name:    "NaN wanted, number got",
			got:     []bundle.Tensor{f32("p", []int64{2}, 0, 1)},
			want:    []bundle.Tensor{f32("p", []int64{2}, nan, 1)},
			wantMsg: []string{`worst at [0]: got 0, want NaN (non-finite`},
		},
		{
			name: "same infinities pass",
			got:  []bundle.Tensor{f32("p", []int64{3}, inf, -inf, 1.0001)},
			want: []bundle.Tensor{f32("p", []int64{3}, inf, -inf, 1)},
		},
		{
			name:    "opposite infinity",
			got:     []bundle.Tensor{f32("p", []int64{2}, -inf, 1)},
			want:    []bundle.Tensor{f32("p", []int64{2}, inf, 1)},
			wantMsg: []string{`worst at [0]: got -Inf, want +Inf (non-finite`},
		},
		{
			name:    "finite where infinity wanted",
			got:     []bundle.Tensor{f32("p", []int64{1}, math.MaxFloat32)},
			want:    []bundle.Tensor{f32("p", []int64{1}, inf)},
			wantMsg: []string{`got 3.4028235e+38, want +Inf`},
		},
		{
			name:    "infinity where finite wanted beats a large finite error",
			got:     []bundle.Tensor{f32("p", []int64{2}, 100, inf)},
			want:    []bundle.Tensor{f32("p", []int64{2}, 1, 1)},
			wantMsg: []string{`2 of 2 elements out of tolerance; worst at [1]: got +Inf, want 1`},
		},
		{
			name:    "shape mismatch",
			got:     []bundle.Tensor{f32("logits", []int64{3, 2}, ones(6)...)},
			want:    []bundle.Tensor{f32("logits", s23, ones(6)...)},
			wantMsg: []string{`output "logits": shape [3 2], want [2 3]`},
		},
		{
			name:    "scalar against rank 1",
			got:     []bundle.Tensor{f32("s", []int64{1}, 1)},
			want:    []bundle.Tensor{f32("s", nil, 1)},
			wantMsg: []string{`output "s": shape [1], want [] (scalar)`},
		},
		{
			name:    "dtype mismatch",
			got:     []bundle.Tensor{f64("logits", []int64{2}, 1, 1)},
			want:    []bundle.Tensor{f32("logits", []int64{2}, 1, 1)},
			wantMsg: []string{`output "logits": dtype float64, want float32`},
		},
		{
			name:    "malformed engine output",
			got:     []bundle.Tensor{{Name: "x", DType: bundle.Float32, Shape: []int64{2}, Data: make([]byte, 4)}},
			want:    []bundle.Tensor{f32("x", []int64{2}, 1, 1)},
			wantMsg: []string{`output "x": malformed engine output`},
		},
		{
			name:       "malformed reference is not the engine's fault",
			got:        []bundle.Tensor{f32("x", []int64{2}, 1, 1)},
			want:       []bundle.Tensor{{Name: "x", DType: bundle.Float32, Shape: []int64{2}, Data: make([]byte, 4)}},
			wantMsg:    []string{`reference output 0`},
			notFailure: true,
		},
		{
			name:    "count mismatch",
			got:     []bundle.Tensor{f32("a", []int64{1}, 1)},
			want:    []bundle.Tensor{f32("a", []int64{1}, 1), f32("b", []int64{1}, 1)},
			wantMsg: []string{`engine returned 1 outputs, want 2 ("a", "b")`},
		},
		{
			name:    "int64 differs beyond float64 precision",
			got:     []bundle.Tensor{i64("ids", []int64{2}, 1<<60+1, 5)},
			want:    []bundle.Tensor{i64("ids", []int64{2}, 1<<60, 5)},
			wantMsg: []string{`output "ids": 1 of 2 elements differ; worst at [0]: got 1152921504606846977, want 1152921504606846976 (integers must match exactly)`},
		},
		{
			name:    "int64 worst is the largest difference",
			got:     []bundle.Tensor{i64("ids", []int64{3}, -1, 5, 100)},
			want:    []bundle.Tensor{i64("ids", []int64{3}, 1, 7, 99)},
			wantMsg: []string{`3 of 3 elements differ; worst at [0]: got -1, want 1`},
		},
		{
			name:    "uint64 near the top",
			got:     []bundle.Tensor{u64("u", []int64{1}, math.MaxUint64-1)},
			want:    []bundle.Tensor{u64("u", []int64{1}, math.MaxUint64)},
			wantMsg: []string{`got 18446744073709551614, want 18446744073709551615`},
		},
		{
			name:    "int32",
			got:     []bundle.Tensor{i32("k", []int64{2}, 3, -4)},
			want:    []bundle.Tensor{i32("k", []int64{2}, 3, 4)},
			wantMsg: []string{`1 of 2 elements differ; worst at [1]: got -4, want 4`},
		},
		{
			name: "bool non-zero bytes are all true",
			got:  []bundle.Tensor{boolT("m", []int64{2}, 2, 0)},
			want: []bundle.Tensor{boolT("m", []int64{2}, 1, 0)},
		},
		{
			name:    "bool mismatch",
			got:     []bundle.Tensor{boolT("m", []int64{2}, 1, 1)},
			want:    []bundle.Tensor{boolT("m", []int64{2}, 1, 0)},
			wantMsg: []string{`worst at [1]: got true, want false (bools must match exactly)`},
		},
		{
			name: "float16 within its default tolerance",
			got:  []bundle.Tensor{f16("h", []int64{2}, 1.005, 2)},
			want: []bundle.Tensor{f16("h", []int64{2}, 1, 2)},
		},
		{
			name:    "float16 beyond its default tolerance",
			got:     []bundle.Tensor{f16("h", []int64{2}, 1.25, 2)},
			want:    []bundle.Tensor{f16("h", []int64{2}, 1, 2)},
			wantMsg: []string{`output "h": 1 of 2 elements out of tolerance; worst at [0]: got 1.25, want 1 (|diff| 0.25 > 0.02 = atol 0.01 + rtol 0.01·|want|)`},
		},
		{
			name: "bfloat16 within its default tolerance",
			got:  []bundle.Tensor{bf16("b", []int64{2}, 1.0390625, 2)},
			want: []bundle.Tensor{bf16("b", []int64{2}, 1, 2)},
		},
		{
			name:    "bfloat16 beyond its default tolerance",
			got:     []bundle.Tensor{bf16("b", []int64{2}, 1, 2.5)},
			want:    []bundle.Tensor{bf16("b", []int64{2}, 1, 2)},
			wantMsg: []string{`worst at [1]: got 2.5, want 2 (|diff| 0.5 > 0.15 = atol 0.05 + rtol 0.05·|want|)`},
		},
		{
			name:    "float64 uses its tighter default",
			got:     []bundle.Tensor{f64("d", []int64{1}, 1.0001)},
			want:    []bundle.Tensor{f64("d", []int64{1}, 1)},
			wantMsg: []string{`got 1.0001, want 1 (|diff| 0.0001 > 1.1e-05 = atol 1e-06 + rtol 1e-05·|want|)`},
		},
		{
			name:    "failures across chunk boundaries are counted and located",
			got:     []bundle.Tensor{f32("big", []int64{3, 1000}, big(map[int]float32{5: 1.1, 1023: 1.2, 1024: 1.3, 2500: 2})...)},
			want:    []bundle.Tensor{f32("big", []int64{3, 1000}, ones(3000)...)},
			wantMsg: []string{`output "big": 4 of 3000 elements out of tolerance; worst at [2 500]: got 2, want 1`},
		},
		{
			name: "several failing outputs, worst first",
			got: []bundle.Tensor{
				f32("a", []int64{1}, 1.01),
				f32("b", []int64{1}, 1),
				f32("c", []int64{1}, nan),
				f32("d", []int64{1}, 2),
			},
			want: []bundle.Tensor{
				f32("a", []int64{1}, 1),
				f32("b", []int64{1}, 1),
				f32("c", []int64{1}, 1),
				f32("d", []int64{1}, 1),
			},
			wantMsg: []string{`output "c": `, `; output "d": `, `; output "a": `},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.got, tc.want, tc.tol)
			if tc.wantMsg == nil {
				if err != nil {
					t.Fatalf("Check: unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check passed, want an error containing %q", tc.wantMsg)
			}
			msg := err.Error()
			rest := msg
			for _, sub := range tc.wantMsg {
				i := strings.Index(rest, sub)
				if i < 0 {
					t.Fatalf("error %q\n lacks (in order) %q", msg, sub)
				}
				rest = rest[i+len(sub):]
			}
			var f *Failure
			if tc.notFailure {
				if errors.As(err, &f) {
					t.Fatalf("error %q is a *Failure of class %s, want a plain error", msg, f.Class)
				}
				return
			}
			if !errors.As(err, &f) {
				t.Fatalf("error %q is not a *Failure", msg)
			}
			if f.Class != FailWrongAnswer || f.Op != "check" {
				t.Fatalf("failure class %q op %q, want wrong_answer / check", f.Class, f.Op)
			}
			if ClassOf(err, FailRuntime) != FailWrongAnswer {
				t.Fatalf("ClassOf = %s", ClassOf(err, FailRuntime))
			}
		})
	}
}

func TestCheckSkipsPassingOutputs(t *testing.T) {
	// Only the failing output is reported, so the message points at the
	// output to look at.
	err := Check(
		[]bundle.Tensor{f32("ok", []int64{1}, 1), f32("bad", []int64{1}, 5)},
		[]bundle.Tensor{f32("ok", []int64{1}, 1), f32("bad", []int64{1}, 1)}, nil)
	if err == nil || strings.Contains(err.Error(), `"ok"`) || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("error %v: want only output \"bad\" named", err)
	}
}

func TestDefaultTolerance(t *testing.T) {
	for _, tc := range []struct {
		d          bundle.DType
		atol, rtol float64
	}{
		{bundle.Float32, 1e-4, 1e-3},
		{bundle.Float64, 1e-6, 1e-5},
		{bundle.Float16, 1e-2, 1e-2},
		{bundle.BFloat16, 5e-2, 5e-2},
		{bundle.Int64, 0, 0},
		{bundle.Bool, 0, 0},
	} {
		a, r := DefaultTolerance(tc.d)
		if a != tc.atol || r != tc.rtol {
			t.Errorf("DefaultTolerance(%s) = %g, %g, want %g, %g", tc.d, a, r, tc.atol, tc.rtol)
		}
	}
}

func TestCheckAllocations(t *testing.T) {
	// A passing check of a large output that is not bit-identical must not
	// allocate in proportion to its size.
	n := 1 << 16
	w := ones(n)
	g := ones(n)
	for i := range g {
		g[i] += 1e-5
	}
	got := []bundle.Tensor{f32("x", []int64{int64(n)}, g...)}
	want := []bundle.Tensor{f32("x", []int64{int64(n)}, w...)}
	allocs := testing.AllocsPerRun(5, func() {
		if err := Check(got, want, nil); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Fatalf("Check allocated %v times per run, want at most 2", allocs)
	}
}

func BenchmarkCheckFloat32(b *testing.B) {
	n := 1 << 20
	w := make([]float32, n)
	g := make([]float32, n)
	for i := range w {
		w[i] = float32(i%1000) / 100
		g[i] = w[i] * (1 + 1e-5)
	}
	got := []bundle.Tensor{f32("x", []int64{int64(n)}, g...)}
	want := []bundle.Tensor{f32("x", []int64{int64(n)}, w...)}
	b.SetBytes(int64(8 * n))
	b.ResetTimer()
	for b.Loop() {
		if err := Check(got, want, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// MaxAbsErrors is what the build log records per output: the largest
// absolute difference, 0 for identical bytes, "" where outputs cannot be
// compared element by element.
func TestMaxAbsErrors(t *testing.T) {
	nan := float32(math.NaN())
	want := []bundle.Tensor{f32("a", []int64{3}, 1, 2, 3), f32("b", []int64{2}, 1, 2), f32("c", []int64{1}, nan), f32("d", []int64{2}, 1, 2)}
	got := []bundle.Tensor{f32("a", []int64{3}, 1, 2.5, 2.75), f32("b", []int64{2}, 1, 2), f32("c", []int64{1}, nan), f32("d", []int64{1}, 1)}
	if errs := MaxAbsErrors(got, want); !slices.Equal(errs, []string{"0.5", "0", "0", ""}) {
		t.Errorf("MaxAbsErrors = %q, want [0.5 0 0 \"\"]", errs)
	}
	if errs := MaxAbsErrors(got[:1], want); !slices.Equal(errs, []string{"0.5", "", "", ""}) {
		t.Errorf("with outputs missing: %q", errs)
	}
}

// MaxAbsError is the figure bundle check reports per output, beside the
// Tolerance the check allows it.
func TestMaxAbsErrorAndTolerance(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		name      string
		got, want bundle.Tensor
		diff      float64
		ok        bool
	}{
		{"floats", f32("y", []int64{3}, 1, 2.25, -3), f32("y", []int64{3}, 1, 2, -2), 1, true},
		{"identical", f32("y", []int64{2}, 1, 2), f32("y", []int64{2}, 1, 2), 0, true},
		{"an infinity differs", f32("y", []int64{2}, inf, 2), f32("y", []int64{2}, 1, 2), math.Inf(1), true},
		{"equal ints", i64("n", []int64{2}, 4, 5), i64("n", []int64{2}, 4, 5), 0, true},
		{"ints differ", i64("n", []int64{2}, 4, 6), i64("n", []int64{2}, 4, 5), 0, false},
		{"shapes differ", f32("y", []int64{1}, 1), f32("y", []int64{2}, 1, 2), 0, false},
	} {
		if d, ok := MaxAbsError(&tc.got, &tc.want); d != tc.diff || ok != tc.ok {
			t.Errorf("%s: MaxAbsError = %g, %v, want %g, %v", tc.name, d, ok, tc.diff, tc.ok)
		}
	}
	y, n := f32("y", []int64{1}, 1), i64("n", []int64{1}, 1)
	loose := 0.5
	tol := map[string]bundle.Tolerance{"y": {ATol: &loose}, "n": {ATol: &loose}}
	if a, r := Tolerance(&y, tol); a != 0.5 || r != 1e-3 {
		t.Errorf("Tolerance(y) = %g, %g, want the override's atol 0.5 and the default rtol 1e-3", a, r)
	}
	if a, r := Tolerance(&n, tol); a != 0 || r != 0 {
		t.Errorf("Tolerance(n) = %g, %g, want 0, 0: integers match exactly", a, r)
	}
}
