package svgchart_test

import (
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/svgchart"
)

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 12: "12", 9999: "9999", 12345: "12.3k", 3481454.7: "3.48M", 2.5e9: "2.5G", 0.002263: "0.00226", 1.5: "1.5", 1234.5: "1234"} {
		if got := svgchart.Num(v); got != want {
			t.Errorf("Num(%g) = %q, want %q", v, got, want)
		}
	}
}

func TestLinesSaysWhatItDraws(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chart svgchart.Lines
		want  string
	}{
		{"empty", svgchart.Lines{}, ""},
		{"two series", svgchart.Lines{Title: "t <x>", Series: []svgchart.Series{
			{Name: "a", Points: []svgchart.Point{{X: "1", Y: 1}, {X: "2", Y: 3, Mark: "winner changed"}}},
			{Name: "b", Points: []svgchart.Point{{X: "2", Y: 2}}},
		}}, `data-kind="lines" data-series="2" data-points="3"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(tc.chart.SVG())
			if tc.want == "" {
				if got != "" {
					t.Fatalf("drew %q", got)
				}
				return
			}
			if !strings.Contains(got, tc.want) || strings.Count(got, `class="point`) != 3 || strings.Count(got, `class="point mark"`) != 1 {
				t.Errorf("chart %s", got)
			}
			if strings.Contains(got, "<x>") {
				t.Error("title not escaped")
			}
		})
	}
}

func TestTickStepKeepsLabelsApart(t *testing.T) {
	for _, tc := range []struct{ n, chars, width, want int }{
		{1, 11, 324, 1}, {2, 11, 324, 1}, {5, 11, 324, 1}, {10, 11, 324, 3}, {60, 11, 324, 14}, {10, 2, 324, 1},
	} {
		step := svgchart.TickStep(tc.n, tc.chars, tc.width)
		if step != tc.want {
			t.Errorf("TickStep(%d, %d, %d) = %d, want %d", tc.n, tc.chars, tc.width, step, tc.want)
		}
		// Two labels drawn step categories apart are at least as far
		// apart as a label is wide (at tickCharW a character) plus a gap.
		if tc.n > 1 && float64(step)*float64(tc.width)/float64(tc.n-1) < float64(tc.chars)*6.2+8 {
			t.Errorf("TickStep(%d, %d, %d) = %d: labels overlap", tc.n, tc.chars, tc.width, step)
		}
	}
}

func TestLinesShowsFailuresAndMarks(t *testing.T) {
	got := string(svgchart.Lines{Small: true, XS: []string{"r1", "r2", "r3"}, XText: func(x string) string { return "day " + x },
		Marks:  []svgchart.XMark{{X: "r2", Class: "settings", Label: "settings changed: candidates a → b"}},
		Series: []svgchart.Series{{Name: "graph 0", Points: []svgchart.Point{{X: "r1", Y: 10}, {X: "r2", Failed: "failed: wrong_answer"}, {X: "r3", Y: 12}}}},
	}.SVG())
	for want, n := range map[string]int{`class="point failed"`: 1, `class="xmark settings"`: 1, `class="xtick"`: 3, "day r2": 1, `class="point"`: 2, "<polyline": 1} {
		if c := strings.Count(got, want); c != n {
			t.Errorf("%d × %s, want %d in %s", c, want, n, got)
		}
	}
}

func TestDeltasDrawASmallRegressionVisibly(t *testing.T) {
	got := string(svgchart.Deltas("t", []svgchart.Delta{{Label: "graph 0", Ratio: 0.92, Fill: "#d9443a"}, {Label: "graph 1", Ratio: 1.0, Fill: "#888"}}, nil))
	if !strings.Contains(got, "-8.0%") || strings.Count(got, `class="bar"`) != 2 {
		t.Fatalf("chart %s", got)
	}
	// -8% of a ±10% span (log scale: ln 0.92 / ln 1.1 = 0.875 of the
	// 150 px half-width), not a sliver.
	if !strings.Contains(got, `width="131.2"`) {
		t.Errorf("the 8%% regression is not drawn wide: %s", got)
	}
}
