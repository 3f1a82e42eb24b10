package runstate

import (
	"context"
	"fmt"
	"time"
)

// The reconciler (jobs.Reconciler) repairs runs that cannot end by
// themselves; what it keeps in Redis is here.

// epochKey marks a Redis the reconciler has seen. Its absence means Redis
// is new or lost its data (a restart without persistence): the list of
// running runs went with it, so the runs are looked for in the store.
const epochKey = keyPrefix + "epoch"

// MarkEpoch marks Redis as seen by a reconciler and reports whether it was
// not marked before (fresh: Redis is new, or lost its data).
func (r *Runs) MarkEpoch(ctx context.Context) (fresh bool, err error) {
	fresh, err = r.rdb.SetNX(ctx, epochKey, time.Now().UTC().Format(time.RFC3339), 0).Result()
	if err != nil {
		return false, fmt.Errorf("reconcile: %w", err)
	}
	return fresh, nil
}

// reconcilerLock is held by the worker that reconciles.
const reconcilerLock = keyPrefix + "reconciler"

// HoldReconcilerLock takes the fleet's reconciler lock for token, or
// renews it for ttl when token holds it already, and reports whether
// token holds it now. An error leaves the lock as it was.
func (r *Runs) HoldReconcilerLock(ctx context.Context, token string, ttl time.Duration) (bool, error) {
	ok, err := r.rdb.SetNX(ctx, reconcilerLock, token, ttl).Result()
	if err != nil {
		return false, err
	}
	if ok {
		return true, nil
	}
	held, err := r.rdb.Get(ctx, reconcilerLock).Result()
	if err != nil || held != token {
		return false, nil
	}
	r.rdb.PExpire(ctx, reconcilerLock, ttl)
	return true, nil
}
