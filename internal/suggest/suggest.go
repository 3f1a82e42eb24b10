package suggest

// Closest is the known name closest to word by edit distance (in runes),
// when it is close enough to be a typo of it: at most a third of the
// longer name's length, and at least one edit allowed. It returns "" when
// none is, and for a word longer than maxLen (0: any length), which is no
// typo of a name that long and would cost a quadratic comparison. Ties go
// to the first in known.
func Closest(word string, known []string, maxLen int) string {
	if maxLen > 0 && len(word) > maxLen {
		return ""
	}
	best, bestD := "", 0
	for _, k := range known {
		d := Distance(word, k)
		if best == "" || d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" || bestD > max(1, max(len([]rune(word)), len([]rune(best)))/3) {
		return ""
	}
	return best
}

// Distance is the Levenshtein distance between a and b, in runes.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
