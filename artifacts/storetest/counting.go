package storetest

import (
	"context"
	"io"
	"sync/atomic"

	"github.com/tunefleet/tunefleet/artifacts"
)

// Counting counts the requests that reach a store, by kind. It keeps the
// store's conditional write (artifacts.Creator) for callers that look for
// it; over a store without one, a Create is its Stat and Put, counted so.
type Counting struct {
	artifacts.Store
	Puts, Gets, Stats, Lists, Creates atomic.Int64
}

// Requests is every request counted so far.
func (c *Counting) Requests() int64 {
	return c.Puts.Load() + c.Gets.Load() + c.Stats.Load() + c.Lists.Load() + c.Creates.Load()
}

// Reset sets every count to zero.
func (c *Counting) Reset() {
	for _, n := range []*atomic.Int64{&c.Puts, &c.Gets, &c.Stats, &c.Lists, &c.Creates} {
		n.Store(0)
	}
}

func (c *Counting) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	c.Puts.Add(1)
	return c.Store.Put(ctx, key, r, size)
}

func (c *Counting) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	c.Gets.Add(1)
	return c.Store.Get(ctx, key)
}

func (c *Counting) Stat(ctx context.Context, key string) (artifacts.ObjectInfo, error) {
	c.Stats.Add(1)
	return c.Store.Stat(ctx, key)
}

func (c *Counting) List(ctx context.Context, prefix string) ([]string, error) {
	c.Lists.Add(1)
	return c.Store.List(ctx, prefix)
}

func (c *Counting) Create(ctx context.Context, key string, r io.Reader, size int64) (bool, error) {
	if cr, ok := c.Store.(artifacts.Creator); ok {
		c.Creates.Add(1)
		return cr.Create(ctx, key, r, size)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return false, err
	}
	// Through c with Create hidden: PutNew's Stat and Put are counted.
	return artifacts.PutNew(ctx, struct{ artifacts.Store }{c}, key, data)
}

var _ artifacts.Creator = (*Counting)(nil)
