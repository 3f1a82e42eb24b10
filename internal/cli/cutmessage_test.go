package cli

import (
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/clip"
)

// cutMessage leaves ordinary messages byte for byte (spaces, tabs and
// newlines included) and cuts only the words and messages that are too
// long.
func TestCutMessage(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 1000)
	tests := []struct {
		in, want string
	}{
		{"bundle b is invalid: graph 0:\n\tsample 1: bad", "bundle b is invalid: graph 0:\n\tsample 1: bad"},
		{"", ""},
		{"open " + long + ": file name too long", "open " + clip.Counted(long, clip.Echo) + ": file name too long"},
		{"é " + strings.Repeat("é", 300), "é " + clip.Counted(strings.Repeat("é", 300), clip.Echo)},
	}
	for _, tt := range tests {
		if got := cutMessage(tt.in); got != tt.want {
			t.Errorf("cutMessage(%.60q) = %.300q, want %.300q", tt.in, got, tt.want)
		}
	}
	many := strings.Repeat("word ", 10_000)
	if got := []rune(cutMessage(many)); len(got) > maxMessage+40 || !strings.HasSuffix(string(got), "more characters)") {
		t.Errorf("a 50,000-character message of short words cut to %d characters", len(got))
	}
}
