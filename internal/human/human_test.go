package human_test

import (
	"math"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/human"
)

func TestNumber(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {12, "12"}, {1.5, "1.5"}, {0.1, "0.1"}, {0.002263, "0.00226"},
		{999.4, "999"}, {999.5, "1000"}, // never an exponent where three digits round up
		{1234.5, "1234"}, {1659, "1659"}, {9999, "9999"},
		{12345, "12.3k"}, {3481454.7, "3.48M"}, {15.2e6, "15.2M"}, {2.5e9, "2.5G"}, {4e12, "4T"},
		{-3481454.7, "-3.48M"}, {math.Inf(1), "+Inf"}, {math.NaN(), "NaN"},
	} {
		if got := human.Number(tc.v); got != tc.want {
			t.Errorf("Number(%g) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestSeconds(t *testing.T) {
	for _, tc := range []struct {
		s    float64
		want string
	}{
		{0, "0.0s"}, {4.24, "4.2s"}, {59.9, "59.9s"}, {60, "1m00s"}, {185, "3m05s"},
		{3599, "59m59s"}, {3600, "1h00m"}, {3720, "1h02m"}, {90000, "25h00m"},
	} {
		if got := human.Seconds(tc.s); got != tc.want {
			t.Errorf("Seconds(%g) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {-time.Second, "-"}, {400 * time.Microsecond, "<1ms"}, {420 * time.Millisecond, "420ms"},
		{999 * time.Millisecond, "999ms"}, {time.Second, "1.0s"}, {4240 * time.Millisecond, "4.2s"},
		{59900 * time.Millisecond, "59.9s"}, {185 * time.Second, "3m5s"}, {3725 * time.Second, "1h2m5s"},
	} {
		if got := human.Duration(tc.d); got != tc.want {
			t.Errorf("Duration(%s) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// TestTime: a time for people is in UTC and says so, whatever zone it
// was read in; the zero time is a dash.
func TestTime(t *testing.T) {
	ist := time.FixedZone("IST", 5*3600+1800)
	at := time.Date(2026, 12, 1, 7, 30, 5, 0, ist) // 02:00:05 UTC
	for _, tc := range []struct{ got, want string }{
		{human.Time(at), "2026-12-01 02:00:05 UTC"},
		{human.Clock(at), "02:00:05 UTC"},
		{human.Time(time.Time{}), "—"},
		{human.Clock(time.Time{}), "—"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
