package human

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Number writes v in three significant digits, with k, M, G, T for values
// from 10,000 up (15.2M), whole numbers below that as integers (1659, not
// 1.66k, whose last digit a reader would miss), and never "0" for a value
// that is not zero (0.1, 0.00226).
func Number(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0 || math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'g', -1, 64)
	case a >= 1e4:
		for _, u := range []struct {
			div float64
			sfx string
		}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
			if a >= u.div {
				return strconv.FormatFloat(v/u.div, 'g', 3, 64) + u.sfx
			}
		}
	case a >= 999.5: // from here three digits would round to 1e+03
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// Seconds writes a duration given in seconds in the units that read at
// its size: 1h02m, 3m05s, 4.2s (a night's plan, its estimate, a page's
// device time).
func Seconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
}

// Duration writes how long something took for a table cell: whole
// seconds from a minute up (3m5s, 1h2m5s), a tenth of a second below
// it (4.2s), and milliseconds under a second (420ms), so a run that took
// 0.4 s never reads "0s". Zero is "0s"; a negative duration is "-".
func Duration(d time.Duration) string {
	switch {
	case d < 0:
		return "-"
	case d == 0:
		return "0s"
	case d < time.Millisecond:
		return "<1ms"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	default:
		return d.Round(time.Second).String()
	}
}

// TimeLayout is the one way a time is written for people: in UTC, saying
// so, in every table, page, report and webhook (machine output is RFC
// 3339 in UTC). ClockLayout is its time of day alone.
const (
	TimeLayout  = "2006-01-02 15:04:05 UTC"
	ClockLayout = "15:04:05 UTC"
)

// Time writes t for people: TimeLayout, "—" for the zero time.
func Time(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format(TimeLayout)
}

// Clock writes t's time of day for people: ClockLayout, "—" for the zero
// time.
func Clock(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format(ClockLayout)
}
