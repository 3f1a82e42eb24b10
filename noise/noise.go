package noise

import (
	"encoding/json"
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// Level is the confidence of every interval the rule computes.
const Level = 0.99

// MinGain is the smallest advantage a winner must hold beyond noise (the
// lower bound of its ratio over the runner-up must exceed 1 + MinGain):
// below it, two engines are the same engine for any purpose a user has.
const MinGain = 0.05

// Fences are Tukey's fences of a set of values: values outside [Lo, Hi]
// are outliers.
type Fences struct{ Lo, Hi float64 }

// TukeyFences returns the fences 1.5 interquartile ranges beyond the
// quartiles. With fewer than four values every value is inside.
func TukeyFences(xs []float64) Fences {
	if len(xs) < 4 {
		return Fences{Lo: math.Inf(-1), Hi: math.Inf(1)}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return fencesOf(s, 1.5)
}

// fencesOf are the fences k interquartile ranges beyond the quartiles of
// sorted values: 1.5 Tukey's inner fences, 3 his far ones.
func fencesOf(sorted []float64, k float64) Fences {
	q1, q3 := Quantile(sorted, 0.25), Quantile(sorted, 0.75)
	iqr := q3 - q1
	return Fences{Lo: q1 - k*iqr, Hi: q3 + k*iqr}
}

// Inside reports whether x is within the fences.
func (f Fences) Inside(x float64) bool { return x >= f.Lo && x <= f.Hi }

// Quantile interpolates linearly between closest ranks of sorted values.
func Quantile(sorted []float64, p float64) float64 {
	switch len(sorted) {
	case 0:
		return math.NaN()
	case 1:
		return sorted[0]
	}
	pos := p * float64(len(sorted)-1)
	lo, hi := int(math.Floor(pos)), int(math.Ceil(pos))
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

// Trimmed is the mean of the values within the fences, with how many were
// left out. When the fences leave nothing (cannot happen for real fences)
// it is the plain mean.
func Trimmed(xs []float64, f Fences) (mean float64, dropped int) {
	var sum float64
	n := 0
	for _, x := range xs {
		if f.Inside(x) {
			sum += x
			n++
		}
	}
	if n == 0 {
		m, _ := MeanStd(xs)
		return m, 0
	}
	return sum / float64(n), len(xs) - n
}

// MeanStd is the mean and population standard deviation.
func MeanStd(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)))
}

// CVInside is the coefficient of variation of the values within the
// fences: the spread of what the estimate is made of.
func CVInside(xs []float64, f Fences) float64 {
	var in []float64
	for _, x := range xs {
		if f.Inside(x) {
			in = append(in, x)
		}
	}
	m, s := MeanStd(in)
	if m == 0 {
		return 0
	}
	return s / m
}

// Ratio is how much better one measurement is than another: Value > 1
// means better, with its interval [Lo, Hi] at Level confidence. Rounds is
// how many round estimates each side had (the smaller); Paired whether
// they were compared round by round.
type Ratio struct {
	Value  float64 `json:"value"`
	Lo     float64 `json:"lo"`
	Hi     float64 `json:"hi"`
	Rounds int     `json:"rounds"`
	Paired bool    `json:"paired,omitempty"`
}

// Verdict of a comparison.
type Verdict int

// Verdicts: a beats b, b beats a, or neither beyond noise.
const (
	Tie Verdict = iota
	Better
	Worse
)

// Decide says whether the ratio holds beyond noise: Better when its lower
// bound is above 1+minGain, Worse when its upper bound is below
// 1/(1+minGain), Tie otherwise.
func (r Ratio) Decide(minGain float64) Verdict {
	switch {
	case r.Lo > 1+minGain:
		return Better
	case r.Hi < 1/(1+minGain):
		return Worse
	}
	return Tie
}

// Move is how a timing moved between two measurements: the sign of the
// change in time per sample (+1 slower, -1 faster, 0 within noise), which
// history reports as is; String names it for a comparison's verdict.
type Move int

// Moves, by the sign of the change in time per sample.
const (
	WithinNoise Move = 0
	Slower      Move = +1
	Faster      Move = -1
)

// String is the move's name: "faster", "slower" or "within_noise".
func (m Move) String() string {
	switch m {
	case Faster:
		return "faster"
	case Slower:
		return "slower"
	}
	return "within_noise"
}

// Move reads a ratio of the new measurement over the old (how much better
// the new one is) as a move beyond noise: Faster when it Decides Better
// at minGain, Slower when Worse, WithinNoise on a tie. A comparison of two
// runs and the history's comparison of two nights both say it so.
func (r Ratio) Move(minGain float64) Move {
	switch r.Decide(minGain) {
	case Better:
		return Faster
	case Worse:
		return Slower
	}
	return WithinNoise
}

// CompareCosts compares two measurements given as per-round costs (time
// per sample: lower is better) and returns how much better a is than b
// (b/a). paired compares round i with round i (the rounds alternated
// between the two, so a neighbour's load in one round hit both); it needs
// the same number of rounds on each side and falls back to Welch's
// interval otherwise. With fewer than two rounds on a side there is no
// spread to go by: the interval is unbounded unless both sides are the
// same numbers (identical engines share one measurement), which is a tie
// at exactly 1.
//
// A round far out of its side's others (beyond Tukey's far fences, three
// interquartile ranges, and more than SwallowedFactor from the side's
// median) is left out first: a pause longer than the round (the
// process descheduled, a page fault storm) swallows it whole, so it holds
// one stalled call that the round's own fences cannot drop, and that one
// number would widen the interval until a 20-fold change reads as noise.
// In a paired comparison the round is left out of both sides.
func CompareCosts(a, b []float64, paired bool) Ratio {
	la, lb := logs(a), logs(b)
	if paired && len(la) == len(lb) {
		keepA, keepB := farOut(la), farOut(lb)
		la, lb = keep(la, keepA, keepB), keep(lb, keepA, keepB)
	} else {
		la, lb = keep(la, farOut(la), nil), keep(lb, farOut(lb), nil)
	}
	n := min(len(la), len(lb))
	r := Ratio{Rounds: n, Lo: 0, Hi: math.Inf(1)}
	if n == 0 {
		r.Value = math.NaN()
		return r
	}
	if slices.Equal(a, b) {
		return Ratio{Value: 1, Lo: 1, Hi: 1, Rounds: n, Paired: paired}
	}
	ma, sa := meanSD(la)
	mb, sb := meanSD(lb)
	d := mb - ma // ln(b/a): positive when a costs less
	r.Value = math.Exp(d)
	var se, df float64
	if paired && len(la) == len(lb) && n >= 2 {
		diffs := make([]float64, n)
		for i := range diffs {
			diffs[i] = lb[i] - la[i]
		}
		_, sd := meanSD(diffs)
		se, df = sd/math.Sqrt(float64(n)), float64(n-1)
		r.Paired = true
	} else {
		if len(la) < 2 || len(lb) < 2 {
			return r
		}
		va, vb := sa*sa/float64(len(la)), sb*sb/float64(len(lb))
		se = math.Sqrt(va + vb)
		// Welch–Satterthwaite degrees of freedom.
		df = (va + vb) * (va + vb) / (va*va/float64(len(la)-1) + vb*vb/float64(len(lb)-1))
		if math.IsNaN(df) {
			df = float64(len(la) + len(lb) - 2)
		}
	}
	t := StudentT(df, 0.5+Level/2)
	r.Lo, r.Hi = math.Exp(d-t*se), math.Exp(d+t*se)
	return r
}

// SwallowedFactor is how far from its side's median (as a factor) a round
// must be, besides beyond Tukey's far fences, to be left out of a
// comparison: the spread a loaded machine gives rounds stays well within
// it, a round swallowed by a pause is orders of magnitude out.
const SwallowedFactor = 2

// farOut marks, by index, the log-costs to leave out: beyond Tukey's far
// fences and more than SwallowedFactor from the median. Fewer than five
// rounds leave nothing out (no quartiles to go by).
func farOut(ls []float64) []bool {
	out := make([]bool, len(ls))
	if len(ls) < 5 {
		return out
	}
	s := slices.Clone(ls)
	slices.Sort(s)
	f, med := fencesOf(s, 3), Quantile(s, 0.5)
	far := math.Log(SwallowedFactor)
	for i, x := range ls {
		out[i] = !f.Inside(x) && math.Abs(x-med) > far
	}
	return out
}

// keep is xs without the indexes either mark leaves out.
func keep(xs []float64, outA, outB []bool) []float64 {
	var kept []float64
	for i, x := range xs {
		if (i < len(outA) && outA[i]) || (i < len(outB) && outB[i]) {
			continue
		}
		kept = append(kept, x)
	}
	return kept
}

func logs(xs []float64) []float64 {
	out := make([]float64, 0, len(xs))
	for _, x := range xs {
		if x > 0 && !math.IsInf(x, 0) {
			out = append(out, math.Log(x))
		}
	}
	return out
}

// meanSD is the mean and sample (n-1) standard deviation.
func meanSD(xs []float64) (float64, float64) {
	m, s := MeanStd(xs)
	n := float64(len(xs))
	if n < 2 {
		return m, 0
	}
	return m, s * math.Sqrt(n/(n-1))
}

// StudentT is the p-quantile of Student's t distribution with df degrees
// of freedom (p in (0.5, 1)), by bisection on its CDF, which is a
// regularized incomplete beta function (math has Lgamma; the continued
// fraction is Numerical Recipes' betacf).
//
// Quantiles of whole degrees of freedom are remembered: every interval a
// run's report, a comparison or a page draws asks for the same few (a
// benchmark's rounds less one), and each bisection evaluates the
// incomplete beta function dozens of times (a tenth of a finalize's CPU
// before they were remembered). Welch's fractional degrees are computed
// each time, so the memory stays bounded.
func StudentT(df, p float64) float64 {
	if df <= 0 || math.IsNaN(df) {
		return math.Inf(1)
	}
	whole := df == math.Trunc(df) && df <= maxRememberedDF
	if whole {
		if q, ok := quantiles.Load(quantileKey{df, p}); ok {
			return q.(float64)
		}
	}
	q := studentT(df, p)
	if whole && remembered.Add(1) <= maxRemembered {
		quantiles.Store(quantileKey{df, p}, q)
	}
	return q
}

// What StudentT remembers: quantiles of whole degrees of freedom up to
// maxRememberedDF, at most maxRemembered of them (p is any float a caller
// passes; in practice one or two levels).
const (
	maxRememberedDF = 4096
	maxRemembered   = 8192
)

type quantileKey struct{ df, p float64 }

var (
	quantiles  sync.Map // quantileKey → float64
	remembered atomic.Int64
)

// studentT is StudentT's bisection. It stops when an iteration no longer
// moves either end (the interval is down to adjacent floats): what 100
// iterations would return, in about half of them.
func studentT(df, p float64) float64 {
	lo, hi := 0.0, 1.0
	for tCDF(hi, df) < p {
		hi *= 2
		if hi > 1e6 {
			return math.Inf(1)
		}
	}
	for range 100 {
		mid := (lo + hi) / 2
		if tCDF(mid, df) < p {
			if mid == lo {
				break
			}
			lo = mid
		} else {
			if mid == hi {
				break
			}
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// tCDF is P(T ≤ t) for t ≥ 0.
func tCDF(t, df float64) float64 {
	x := df / (df + t*t)
	return 1 - 0.5*regIncBeta(df/2, 0.5, x)
}

func regIncBeta(a, b, x float64) float64 {
	if x <= 0 {
		return 0
	}
	if x >= 1 {
		return 1
	}
	la, _ := math.Lgamma(a + b)
	lb, _ := math.Lgamma(a)
	lc, _ := math.Lgamma(b)
	front := math.Exp(la - lb - lc + a*math.Log(x) + b*math.Log(1-x))
	if x < (a+1)/(a+b+2) {
		return front * betacf(a, b, x) / a
	}
	return 1 - front*betacf(b, a, 1-x)/b
}

func betacf(a, b, x float64) float64 {
	const eps, tiny = 1e-14, 1e-300
	qab, qap, qam := a+b, a+1, a-1
	c, d := 1.0, 1-qab*x/qap
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= 300; m++ {
		m2 := float64(2 * m)
		fm := float64(m)
		aa := fm * (b - fm) * x / ((qam + m2) * (a + m2))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		h *= d * c
		aa = -(a + fm) * (qab + fm) * x / ((a + m2) * (qap + m2))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < eps {
			break
		}
	}
	return h
}

// ratioJSON is Ratio on the wire: an interval without an upper bound (too
// few rounds to know a spread) has hi null, as JSON has no infinity.
type ratioJSON struct {
	Value  *float64 `json:"value"`
	Lo     *float64 `json:"lo"`
	Hi     *float64 `json:"hi"`
	Rounds int      `json:"rounds"`
	Paired bool     `json:"paired,omitempty"`
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// MarshalJSON writes non-finite bounds as null.
func (r Ratio) MarshalJSON() ([]byte, error) {
	zero := 0.0
	j := ratioJSON{Value: finite(r.Value), Lo: finite(r.Lo), Hi: finite(r.Hi), Rounds: r.Rounds, Paired: r.Paired}
	if j.Value == nil {
		j.Value = &zero
	}
	if j.Lo == nil {
		j.Lo = &zero
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads a null upper bound as +Inf.
func (r *Ratio) UnmarshalJSON(b []byte) error {
	var j ratioJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Ratio{Hi: math.Inf(1), Rounds: j.Rounds, Paired: j.Paired}
	if j.Value != nil {
		r.Value = *j.Value
	}
	if j.Lo != nil {
		r.Lo = *j.Lo
	}
	if j.Hi != nil {
		r.Hi = *j.Hi
	}
	return nil
}

// Interval is the Level-confidence interval of the geometric mean of
// positive values (a Student-t interval of the mean of their logs), after
// the values a pause swallowed are left out as CompareCosts leaves them
// out; ok is false with fewer than two. Center is its point: the interval
// always contains it.
func Interval(xs []float64) (lo, hi float64, ok bool) {
	l := kept(xs)
	if len(l) < 2 {
		return 0, 0, false
	}
	m, sd := meanSD(l)
	h := StudentT(float64(len(l)-1), 0.5+Level/2) * sd / math.Sqrt(float64(len(l)))
	return math.Exp(m - h), math.Exp(m + h), true
}

// Center is the geometric mean of positive values after the swallowed
// ones are left out: the point Interval is the interval of (NaN when
// none is positive).
func Center(xs []float64) float64 {
	l := kept(xs)
	if len(l) == 0 {
		return math.NaN()
	}
	m, _ := meanSD(l)
	return math.Exp(m)
}

// kept are the logs of the positive values without the far-out ones.
func kept(xs []float64) []float64 {
	l := logs(xs)
	return keep(l, farOut(l), nil)
}
