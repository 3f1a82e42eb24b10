package web

import (
	"time"

	"github.com/tunefleet/tunefleet/compare"

	"github.com/tunefleet/tunefleet/internal/svgchart"
)

func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

func num(v float64) string { return svgchart.Num(v) }

// pct is part of whole as a percentage, for progress bars.
func pct(part, whole int) int {
	if whole <= 0 {
		return 0
	}
	return part * 100 / whole
}

// verdict is a comparison's verdict in words.
func verdict(v string) string {
	switch v {
	case compare.WithinNoise:
		return "within noise"
	case compare.Faster:
		return "B faster"
	case compare.Slower:
		return "B slower"
	case compare.Missing:
		return "not comparable"
	}
	return v
}
