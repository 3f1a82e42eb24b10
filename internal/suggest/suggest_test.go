package suggest_test

import (
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/suggest"
)

func TestClosest(t *testing.T) {
	known := []string{"priority", "strategy", "candidates", "demo_model", "convnet"}
	for _, tc := range []struct {
		word   string
		maxLen int
		want   string
	}{
		{"priorty", 0, "priority"},     // one letter left out
		{"stratgey", 0, "strategy"},    // two swapped
		{"candidate", 0, "candidates"}, // one short
		{"demo_modle", 0, "demo_model"},
		{"convnet", 0, "convnet"}, // itself
		{"xyz", 0, ""},            // nothing close
		{"p", 0, ""},
		{strings.Repeat("priority", 40), 128, ""}, // too long to be a typo
	} {
		if got := suggest.Closest(tc.word, known, tc.maxLen); got != tc.want {
			t.Errorf("Closest(%.20q) = %q, want %q", tc.word, got, tc.want)
		}
	}
	if d := suggest.Distance("kitten", "sitting"); d != 3 {
		t.Errorf("Distance(kitten, sitting) = %d, want 3", d)
	}
}
