package jobs

import (
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Embedded is the whole pipeline in one process, with nothing to install:
// an in-process Redis-compatible server (miniredis) and a worker pool
// serving it. Its queue state lives only as long as the process; the
// artifacts are in the store.
type Embedded struct {
	Redis  redis.UniversalClient
	Worker *Worker
	mr     *miniredis.Miniredis
}

// StartEmbedded starts miniredis on a loopback port and a worker on it.
// cfg.Redis is filled in.
func StartEmbedded(cfg WorkerConfig) (*Embedded, error) {
	mr := miniredis.NewMiniRedis()
	// Without the TTL clock miniredis never expires keys, and asynq's
	// locks and leases would never end.
	mr.ClockTTL(true)
	if err := mr.Start(); err != nil {
		return nil, fmt.Errorf("start embedded redis: %w", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	cfg.Redis = rdb
	w, err := NewWorker(cfg)
	if err != nil {
		rdb.Close()
		mr.Close()
		return nil, err
	}
	if err := w.Start(); err != nil {
		rdb.Close()
		mr.Close()
		return nil, fmt.Errorf("start embedded worker: %w", err)
	}
	return &Embedded{Redis: rdb, Worker: w, mr: mr}, nil
}

// Addr is the embedded server's address (other local processes may use it).
func (e *Embedded) Addr() string { return e.mr.Addr() }

// Close stops the worker and the server.
func (e *Embedded) Close() {
	e.Worker.Shutdown()
	e.Redis.Close()
	e.mr.Close()
}
