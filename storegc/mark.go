package storegc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
)

// The mark: every digest a kept root names (state.json, result.json,
// latest.json, history, the result index, nightly documents) is live;
// unmarked blobs older than the grace period are garbage.

// sha256Hex finds digests in a root, however it spells them.
var sha256Hex = regexp.MustCompile(`[0-9a-f]{64}`)

// markRoot reads one root document and marks every sha256 it mentions.
// Blobs, objects of removed runs and non-JSON objects (timing caches,
// checkpoint files) are not roots.
func markRoot(ctx context.Context, s artifacts.Store, key string, removed, marked, seen map[string]bool) error {
	if strings.HasPrefix(key, blobPrefix) || !strings.HasSuffix(key, ".json") {
		return nil
	}
	if id, ok := runOf(key); ok && removed[id] {
		return nil
	}
	b, err := artifacts.ReadObject(ctx, s, key, artifacts.MaxJSONSize)
	if errors.Is(err, artifacts.ErrNotExist) {
		return nil // removed since the listing
	}
	if err != nil {
		return fmt.Errorf("read root %s: %w", key, err)
	}
	seen[key] = true
	for _, h := range sha256Hex.FindAll(b, -1) {
		marked[string(h)] = true
	}
	return nil
}

// unmarkedOld returns the blobs no root marked that are older than cutoff.
func unmarkedOld(ctx context.Context, s artifacts.Store, blobs []string, marked map[string]bool, cutoff time.Time, plan *Plan) ([]Object, error) {
	var out []Object
	for _, k := range blobs {
		if marked[strings.TrimPrefix(k, blobPrefix)] {
			plan.MarkedBlobs++
			continue
		}
		info, err := s.Stat(ctx, k)
		if errors.Is(err, artifacts.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stat %s: %w", k, err)
		}
		if !info.ModTime.Before(cutoff) {
			plan.YoungBlobs++
			continue
		}
		out = append(out, Object{Key: k, Size: info.Size})
	}
	return out, nil
}

func readJSON(ctx context.Context, s artifacts.Store, key string, v any) error {
	b, err := artifacts.ReadObject(ctx, s, key, artifacts.MaxJSONSize)
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s in %s: %w", key, s, err)
	}
	return nil
}
