package clip

import (
	"strconv"
	"unicode/utf8"
)

// Echo is how much of a user's input a message repeats.
const Echo = 200

// Text keeps s to its first n characters, with "…" where it cut.
func Text(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// Counted keeps s to its first n characters and says how many it left
// out: "…(1234 more characters)".
func Counted(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…(" + strconv.Itoa(len(r)-n) + " more characters)"
}

// Middle keeps s's first head and last tail characters, with " … "
// between, when s is longer than both together: for a message whose end
// says as much as its start.
func Middle(s string, head, tail int) string {
	r := []rune(s)
	if len(r) <= head+tail {
		return s
	}
	return string(r[:head]) + " … " + string(r[len(r)-tail:])
}
