package artifacts

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tunefleet/tunefleet/internal/suggest"
)

// maxModelName bounds the names a did-you-mean compares (bundle's
// MaxModelNameBytes; bundle is not imported here).
const maxModelName = 128

// ModelPlatforms lists, in one listing of models/, every model the store
// has anything of (a latest.json, a signed pointer, history) and the
// platforms it has it on, sorted. It reads keys only: what an error that
// a model is not there says instead of guessing.
func ModelPlatforms(ctx context.Context, s Store) (map[string][]string, error) {
	keys, err := s.List(ctx, "models/")
	if err != nil {
		return nil, fmt.Errorf("list models/ in %s: %w", s, err)
	}
	out := map[string][]string{}
	for _, k := range keys {
		parts := strings.SplitN(strings.TrimPrefix(k, "models/"), "/", 3)
		if len(parts) < 3 {
			continue
		}
		if ps := out[parts[0]]; !slices.Contains(ps, parts[1]) {
			out[parts[0]] = append(ps, parts[1])
		}
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out, nil
}

// ModelHint says why model has nothing on platform, from the store's
// model list: the platforms it has something on, or that the store has
// no such model and the name it may have meant. "" when the listing
// fails or says nothing more.
func ModelHint(ctx context.Context, s Store, model, platform string) string {
	known, err := ModelPlatforms(ctx, s)
	if err != nil {
		return ""
	}
	if ps, ok := known[model]; ok {
		if slices.Contains(ps, platform) {
			return ""
		}
		return fmt.Sprintf("model %q is in the store on %s, not on %q", model, strings.Join(ps, ", "), platform)
	}
	names := make([]string, 0, len(known))
	for m := range known {
		names = append(names, m)
	}
	slices.Sort(names)
	msg := fmt.Sprintf("the store has no model %q", model)
	if near := suggest.Closest(model, names, maxModelName); near != "" {
		msg += fmt.Sprintf("; did you mean %s?", near)
	} else if len(names) == 0 {
		msg += " (it has no model at all)"
	}
	return msg
}
