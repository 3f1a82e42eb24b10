package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/tunefleet/tunefleet/artifacts"
)

// The head of a model's history on a platform (or class) names its newest
// entries, so that what reads the newest entries (a nightly's page and
// morning report, the run page's links, the nightly's estimate) reads
// one small document instead of listing the whole history, whose length
// grows by an entry a night: a listing costs the history's length, the
// head a constant (issue 35: a night's page took 3.5× as long per model
// over 100 nights of history as over 10).
//
// Finalize keeps it, after the entry is written, under a lock (the read,
// the insert and the write are one step); a finalize cut short before it
// leaves the entry out of the head, and a repeated finalize adds it. So
// the head may miss an entry, never name one that is not there: a reader
// that does not find a run in it falls back to the listing.

// HeadFormat is the version of a history head.
const HeadFormat = "tunefleet.history-head/v1"

// HeadDepth is how many of the newest entries a head names: enough for a
// comparison's look back (a platform serving two classes interleaves
// their entries) and the nightly's estimate (pastDepth).
const HeadDepth = 16

// Head names the newest entries of a model's history on a platform.
type Head struct {
	Format string `json:"format"`
	// Keys are the newest entries' keys, oldest first (as Keys lists
	// them), at most HeadDepth.
	Keys []string `json:"keys"`
	// Complete says Keys is the whole history: a run not named in it has
	// no entry (yet).
	Complete bool `json:"complete"`
	// Class says the history is a target class's (its entries ran on a
	// platform of another name, under whose key each is filed too): a
	// view of the fleet by platform skips it without reading an entry.
	// Absent in heads written before it was kept: unknown until the
	// history's next finalize.
	Class bool `json:"class,omitempty"`
}

// HeadKey is where the head of a model's history on a platform lives
// (beside the history, not in it: Keys never lists it).
func HeadKey(model, platform string) string {
	return "models/" + model + "/" + platform + "/history-head.json"
}

// ReadHead reads the head of a model's history on a platform; ok is false
// when there is none (a history written before heads were kept, or none
// at all).
func ReadHead(ctx context.Context, store artifacts.Store, model, platform string) (h *Head, ok bool, err error) {
	data, err := artifacts.ReadObject(ctx, store, HeadKey(model, platform), artifacts.MaxJSONSize)
	switch {
	case errors.Is(err, artifacts.ErrNotExist):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("read the history head of %s on %s: %w", model, platform, err)
	}
	var out Head
	if json.Unmarshal(data, &out) != nil || out.Format != HeadFormat {
		// Damaged, or another version: as if there were none (the
		// listing is read, and the next finalize starts it again).
		return nil, false, nil
	}
	return &out, true, nil
}

// AddToHead names the entry at key in the head of its history (model and
// where, a platform key or a target class, are the key's), keeping the
// newest HeadDepth; ran is the platform key the entry ran on (Head.Class:
// where is a class when they differ). The caller holds the head's lock
// (finalize takes a Redis lock named HeadKey). A history with no head yet
// is listed once, to start it with its newest entries.
func AddToHead(ctx context.Context, store artifacts.Store, model, where, key, ran string) error {
	h, ok, err := ReadHead(ctx, store, model, where)
	if err != nil {
		return err
	}
	if !ok {
		keys, err := Keys(ctx, store, model, where)
		if err != nil {
			return err
		}
		h = &Head{Format: HeadFormat, Keys: keys, Complete: true}
	}
	class := where != ran
	if slices.Contains(h.Keys, key) {
		if ok && len(h.Keys) <= HeadDepth && h.Class == class {
			return nil // there already: a repeated finalize writes nothing
		}
	} else {
		h.Keys = append(h.Keys, key)
		slices.Sort(h.Keys) // the time leads the name, as in Keys
	}
	if n := len(h.Keys); n > HeadDepth {
		h.Keys, h.Complete = slices.Clone(h.Keys[n-HeadDepth:]), false
	}
	h.Class = class
	if err := artifacts.PutJSON(ctx, store, HeadKey(model, where), h); err != nil {
		return fmt.Errorf("write the history head of %s on %s: %w", model, where, err)
	}
	return nil
}

// ErrNotRecent is returned (wrapped) by FindRecent when the history has a
// head that does not name the run: the run is older than the head's
// entries, or has no entry yet; only the listing (Find) can tell which.
var ErrNotRecent = errors.New("not among the newest history entries")

// FindRecent is Find over the head: a run among the newest entries is
// found, and compared, without listing the history. A history without a
// head is listed, as Find does. A run the head does not name is
// ErrNoEntry when the head is the whole history, else ErrNotRecent.
func FindRecent(ctx context.Context, store artifacts.Store, model, platform, run string) (cur, prev *Entry, err error) {
	h, ok, err := ReadHead(ctx, store, model, platform)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return Find(ctx, store, model, platform, run)
	}
	for i := len(h.Keys) - 1; i >= 0; i-- {
		if RunOf(h.Keys[i]) != run {
			continue
		}
		cur, prev, err := readCompared(ctx, store, h.Keys, i, 0)
		if err == nil && prev == nil && !h.Complete {
			// The entry it is compared with is older than the head (a
			// platform whose other class ran many times since): list.
			return Find(ctx, store, model, platform, run)
		}
		return cur, prev, err
	}
	if h.Complete {
		return nil, nil, fmt.Errorf("%w for run %s of %s on %s", ErrNoEntry, run, model, platform)
	}
	return nil, nil, fmt.Errorf("%w: run %s of %s on %s", ErrNotRecent, run, model, platform)
}

// FindRecentEntry is FindRecent without the entry the run is compared
// with: the run's own entry alone (what a class's history is read for: the
// platform the run ran on, whose history it is compared in), one read
// instead of two or more, and no listing to find an older entry to
// compare with. Its errors are FindRecent's.
func FindRecentEntry(ctx context.Context, store artifacts.Store, model, platform, run string) (*Entry, error) {
	keys, h, err := headKeys(ctx, store, model, platform)
	if err != nil {
		return nil, err
	}
	for i := len(keys) - 1; i >= 0; i-- {
		if RunOf(keys[i]) == run {
			return Read(ctx, store, keys[i])
		}
	}
	if h == nil || h.Complete {
		return nil, fmt.Errorf("%w for run %s of %s on %s", ErrNoEntry, run, model, platform)
	}
	return nil, fmt.Errorf("%w: run %s of %s on %s", ErrNotRecent, run, model, platform)
}

// Recent are the keys of the newest entries of a model's history on a
// platform, oldest first, at most n (n <= HeadDepth): from the head when
// there is one, else from the listing.
func Recent(ctx context.Context, store artifacts.Store, model, platform string, n int) ([]string, error) {
	keys, _, err := RecentOf(ctx, store, model, platform, n)
	return keys, err
}

// RecentOf is Recent, and whether its head says the history is a target
// class's (Head.Class; false without a head, or in a head written before
// it was kept).
func RecentOf(ctx context.Context, store artifacts.Store, model, platform string, n int) (keys []string, class bool, err error) {
	keys, h, err := headKeys(ctx, store, model, platform)
	if err != nil {
		return nil, false, err
	}
	if len(keys) > n {
		keys = keys[len(keys)-n:]
	}
	return keys, h != nil && h.Class, nil
}

// headKeys are the keys the history's head names, oldest first, and the
// head; without a head (nil), every key of the history, listed.
func headKeys(ctx context.Context, store artifacts.Store, model, platform string) ([]string, *Head, error) {
	h, ok, err := ReadHead(ctx, store, model, platform)
	if err != nil {
		return nil, nil, err
	}
	if ok {
		return h.Keys, h, nil
	}
	keys, err := Keys(ctx, store, model, platform)
	return keys, nil, err
}
