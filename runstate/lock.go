package runstate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// lockTTL bounds how long a crashed holder keeps a lock. What runs under
// one is a read and a write of a small object, so it is far longer than the
// work; a holder stalled past it (a stopped process) may overlap the next.
const lockTTL = 30 * time.Second

// lockWait is how long Locked waits for a lock before giving up (the task
// is then retried by asynq).
const lockWait = time.Minute

// unlockScript deletes a lock only if it is still the caller's: a holder
// whose lock expired must not release its successor's.
var unlockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// ErrLockBusy is returned when a lock stayed taken for lockWait.
var ErrLockBusy = errors.New("lock busy")

// Locked runs fn holding the Redis lock name, so that read-compare-write
// steps on the store that different runs share (a model's latest.json)
// happen one at a time across the fleet. S3 has no compare-and-set that
// every S3-compatible server offers; Redis is there anyway. fn's context
// ends at half the lock's TTL: a store that stalls makes fn fail (and its
// task retry) before the lock could expire under it and let another in.
func (r *Runs) Locked(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	key := keyPrefix + "lock:" + name
	var b [16]byte
	rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	deadline := time.Now().Add(lockWait)
	for delay := 5 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		ok, err := r.rdb.SetNX(ctx, key, token, lockTTL).Result()
		if err != nil {
			return fmt.Errorf("take lock %s: %w", name, err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s held by another worker for over %v", ErrLockBusy, name, lockWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
	defer func() {
		// Released even if ctx is over: otherwise the next holder waits
		// out the TTL.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		unlockScript.Run(uctx, r.rdb, []string{key}, token)
	}()
	fctx, cancel := context.WithTimeout(ctx, lockTTL/2)
	defer cancel()
	return fn(fctx)
}
