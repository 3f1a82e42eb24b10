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
