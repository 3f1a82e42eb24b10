package noise

import (
	"math"
	"testing"
)

// bisect100 is StudentT's bisection as it was, 100 iterations whatever
// happens: the early stop must return exactly what it returned.
func bisect100(df, p float64) float64 {
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
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

func TestStudentTStopsWhereTheBisectionDid(t *testing.T) {
	for _, df := range []float64{0.5, 1, 2, 3, 4.37, 9, 19, 29.9, 99, 1000, 4096, 5000.5} {
		for _, p := range []float64{0.6, 0.9, 0.975, 0.995, 0.9995} {
			want := bisect100(df, p)
			if got := studentT(df, p); got != want {
				t.Errorf("studentT(%g, %g) = %v, the 100-step bisection %v", df, p, got, want)
			}
			// Asked twice (the second from memory for whole df): the same.
			for range 2 {
				if got := StudentT(df, p); got != want {
					t.Errorf("StudentT(%g, %g) = %v, want %v", df, p, got, want)
				}
			}
		}
	}
}

func TestStudentTRemembersOnlyWholeDegrees(t *testing.T) {
	StudentT(7, 0.995)
	if _, ok := quantiles.Load(quantileKey{7, 0.995}); !ok {
		t.Error("the quantile of 7 degrees of freedom is not remembered")
	}
	for _, df := range []float64{7.25, maxRememberedDF + 1} {
		StudentT(df, 0.995)
		if _, ok := quantiles.Load(quantileKey{df, 0.995}); ok {
			t.Errorf("the quantile of %g degrees of freedom is remembered: Welch's degrees would grow the memory without bound", df)
		}
	}
}
