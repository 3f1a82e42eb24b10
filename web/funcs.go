package web

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tunefleet/tunefleet/report"

	"github.com/tunefleet/tunefleet/internal/human"
	"github.com/tunefleet/tunefleet/internal/svgchart"
)

func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return human.Time(t)
}

func num(v float64) string { return svgchart.Num(v) }

// pct is part of whole as a percentage, for progress bars.
func pct(part, whole int) int {
	if whole <= 0 {
		return 0
	}
	return part * 100 / whole
}

// short is a digest's first 12 hex digits (its algorithm dropped).
func short(digest string) string {
	digest = strings.TrimPrefix(digest, "sha256:")
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

// devtime is a nightly's device time spent and saved, GPU and CPU apart.
func devtime(t *report.Totals) string {
	out := ""
	for _, d := range []struct {
		name         string
		spent, saved float64
	}{{"GPU", t.GPUSecondsSpent, t.GPUSecondsSaved}, {"CPU", t.CPUSecondsSpent, t.CPUSecondsSaved}} {
		if d.spent == 0 && d.saved == 0 {
			continue
		}
		if out != "" {
			out += " · "
		}
		out += fmt.Sprintf("%s %s spent / %s saved", d.name, human.Seconds(d.spent), human.Seconds(d.saved))
	}
	if out == "" {
		return "none"
	}
	return out
}

// age is how long ago t was, in the largest unit that reads: 40 s, 5 min,
// 3.2 h, 4 d.
func age(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.0f s", math.Max(d.Seconds(), 0))
	case d < time.Hour:
		return fmt.Sprintf("%.0f min", d.Minutes())
	case d < 48*time.Hour:
		return fmt.Sprintf("%.1f h", d.Hours())
	}
	return fmt.Sprintf("%.0f d", d.Hours()/24)
}
