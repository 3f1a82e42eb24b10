package bundle

import "time"

// SetSettleTime sets how old a file's last change must be for the digest
// cache and a Memo to remember it, until the returned restore.
func SetSettleTime(d time.Duration) (restore func()) {
	old := settleTime
	settleTime = d
	return func() { settleTime = old }
}
