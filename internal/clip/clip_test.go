package clip_test

import (
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/clip"
)

func TestClip(t *testing.T) {
	x, e := strings.Repeat("x", 5), strings.Repeat("é", 5)
	for _, tc := range []struct {
		name, got, want string
	}{
		{"Text: short enough", clip.Text("abc", 3), "abc"},
		{"Text: cut", clip.Text(x, 3), "xxx…"},
		{"Text: characters, not bytes", clip.Text(e, 3), "ééé…"},
		{"Text: within n characters though longer in bytes", clip.Text(e, 5), e},
		{"Text: empty", clip.Text("", 0), ""},
		{"Counted: short enough", clip.Counted(x, 5), x},
		{"Counted: cut", clip.Counted(x, 2), "xx…(3 more characters)"},
		{"Counted: characters, not bytes", clip.Counted(e, 4), "éééé…(1 more characters)"},
		{"Middle: short enough", clip.Middle(x, 2, 3), x},
		{"Middle: cut", clip.Middle("abcdefgh", 2, 3), "ab … fgh"},
		{"Middle: characters, not bytes", clip.Middle("éabcdeé", 2, 2), "éa … eé"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

// Echo is what every message that repeats a user's input cuts it to.
func TestEchoCutsALongInput(t *testing.T) {
	long := strings.Repeat("n", 100_000)
	if got := clip.Counted(long, clip.Echo); len(got) > 300 || !strings.HasPrefix(got, strings.Repeat("n", clip.Echo)+"…(") {
		t.Errorf("a 100,000-character input echoed as %d characters: %.80q…", len(got), got)
	}
}
