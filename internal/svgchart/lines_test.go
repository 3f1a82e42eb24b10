package svgchart_test

import (
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/svgchart"
)

// TestEveryMarkerIsInTheLegend: each kind of marker a chart draws has one
// legend entry, with the chart's words for it, and none it does not draw.
func TestEveryMarkerIsInTheLegend(t *testing.T) {
	for _, small := range []bool{true, false} {
		got := string(svgchart.Lines{Small: small, XS: []string{"r1", "r2", "r3", "r4"},
			Marks: []svgchart.XMark{
				{X: "r2", Class: "version", Kind: "new version", Label: "new version: 1b2c", Stroke: "#3567c8"},
				{X: "r3", Class: "version", Kind: "new version", Label: "new version: 3d4e", Stroke: "#3567c8"},
				{X: "r9", Class: "settings", Kind: "settings changed", Label: "not on the chart"},
			},
			MarkText: "winner changed", FailedText: "run failed",
			Series: []svgchart.Series{{Name: "graph 0", Points: []svgchart.Point{
				{X: "r1", Y: 10, Lo: 9, Hi: 11}, {X: "r2", Failed: "failed: wrong_answer"},
				{X: "r3", Y: 12, Mark: "winner changed: a → b"}, {X: "r4", Y: 11}}}},
		}.SVG())
		for want, n := range map[string]int{
			`class="legend-marker"`: 4, ">new version<": 1, ">winner changed<": 1, ">run failed<": 1,
			">interval of the figure<": 1, "settings changed": 0, "flagged": 0,
		} {
			if c := strings.Count(got, want); c != n {
				t.Errorf("small=%v: %d × %s, want %d in %s", small, c, want, n, got)
			}
		}
	}
	// A chart with no markers has no marker legend, and keeps its size.
	plain := string(svgchart.Lines{Small: true, Series: []svgchart.Series{{Name: "g", Points: []svgchart.Point{{X: "a", Y: 1}}}}}.SVG())
	if strings.Contains(plain, "legend-marker") || !strings.Contains(plain, `height="200"`) {
		t.Errorf("a chart without markers: %s", plain)
	}
}
