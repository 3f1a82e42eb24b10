package historytest

import (
	"context"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
)

// Record appends e under its platform and its target class and names it in
// both heads, as finalize does (without finalize's locks: a fixture is the
// store's only writer).
func Record(tb testing.TB, store artifacts.Store, e *history.Entry) {
	tb.Helper()
	ctx := context.Background()
	for _, where := range []string{e.Platform, e.Target} {
		key := history.Key(e.Model, where, e.Created, e.Run)
		if _, err := history.AppendAt(ctx, store, key, e); err != nil {
			tb.Fatal(err)
		}
		if err := history.AddToHead(ctx, store, e.Model, where, key, e.Platform); err != nil {
			tb.Fatal(err)
		}
	}
}
