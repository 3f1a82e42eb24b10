package backend

import "time"

// SetClock replaces the measurement clock until the returned func runs.
func SetClock(f func() time.Duration) (restore func()) {
	old := clock
	clock = f
	return func() { clock = old }
}
