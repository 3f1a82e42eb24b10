package verdict

import (
	"fmt"
	"slices"
	"time"
)

// Scaling is the verdict of a row that measures the same work at two
// sizes (named small and large in its message; smallItems and largeItems
// the items each round handles) side by side (rounds alternating between them, so that the
// machine's load falls on both): the ratio of the per-item cost at the
// large size to that at the small one, from each size's fastest round,
// met when it is at most target (1 is flat; a cost that grows with the
// size bends). The verdict must be the same from each size's third
// fastest round against the other's fastest, either way, or the rounds'
// spread could have turned it: then it is undecided. At least three
// rounds a size.
func Scaling(small, large string, smallItems, largeItems int, smallRounds, largeRounds []time.Duration, target float64) (ratio float64, met string) {
	s, l := slices.Sorted(slices.Values(smallRounds)), slices.Sorted(slices.Values(largeRounds))
	per := func(d time.Duration, n int) float64 { return float64(d) / float64(n) }
	judge := func(sd, ld time.Duration) (float64, bool) {
		r := per(ld, largeItems) / per(sd, smallItems)
		return r, r <= target
	}
	ratio, ok := judge(s[0], l[0])
	why := ""
	if len(s) < 3 || len(l) < 3 {
		why = "fewer than three rounds a size"
	} else if _, hi := judge(s[0], l[2]); hi != ok {
		why = spreadWhy(small, large, s, l)
	} else if _, lo := judge(s[2], l[0]); lo != ok {
		why = spreadWhy(small, large, s, l)
	}
	return ratio, Of(ok, why)
}

func spreadWhy(small, large string, s, l []time.Duration) string {
	return fmt.Sprintf("the verdict changes within the rounds' spread (%s: %v to %v; %s: %v to %v): the machine's load changed",
		large, l[0].Round(time.Microsecond), l[2].Round(time.Microsecond), small, s[0].Round(time.Microsecond), s[2].Round(time.Microsecond))
}
