package runstate

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// sentinelAnswer asks a Sentinel URL's sentinels themselves, once its
// client could not reach a master, what they know of the master it
// names: the first sentinel that answers is reported in its own words;
// nil when none answers (they are down: the usual message holds). A
// master the sentinel does not know is the URL's mistake (badURL).
func sentinelAnswer(ctx context.Context, rawURL string) error {
	u, perr := url.Parse(rawURL)
	if perr != nil {
		return nil
	}
	scheme, kind, _ := strings.Cut(u.Scheme, "+")
	if kind != "sentinel" {
		return nil
	}
	plain := *u
	plain.Scheme = scheme
	o, perr := redis.ParseFailoverURL(plain.String())
	if perr != nil || o.MasterName == "" {
		return nil
	}
	for _, addr := range o.SentinelAddrs {
		s := redis.NewSentinelClient(&redis.Options{Addr: addr, Username: o.SentinelUsername, Password: o.SentinelPassword,
			TLSConfig: o.TLSConfig, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		master, gerr := s.GetMasterAddrByName(qctx, o.MasterName).Result()
		var names []string
		if errors.Is(gerr, redis.Nil) {
			names = masterNames(qctx, s)
		}
		cancel()
		s.Close()
		switch {
		case errors.Is(gerr, redis.Nil):
			known := "it knows none"
			if len(names) > 0 {
				known = "it knows " + strings.Join(names, ", ")
			}
			return badURL{fmt.Errorf("sentinel %s knows no master %q (%s): check ?master_name= in --redis %s", addr, o.MasterName, known, Redact(rawURL))}
		case gerr == nil && len(master) == 2:
			return fmt.Errorf("sentinel %s says master %q is at %s, which did not answer: is its redis-server running?", addr, o.MasterName, strings.Join(master, ":"))
		}
		// This sentinel did not answer: ask the next.
	}
	return nil
}

// masterNames is SENTINEL MASTERS' names, sorted ("" entries dropped).
func masterNames(ctx context.Context, s *redis.SentinelClient) []string {
	masters, err := s.Masters(ctx).Result()
	if err != nil {
		return nil
	}
	var names []string
	for _, m := range masters {
		var kv []any
		switch v := m.(type) {
		case []any:
			kv = v
		case map[any]any: // RESP3
			if n, ok := v["name"].(string); ok {
				names = append(names, n)
			}
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if k, _ := kv[i].(string); k == "name" {
				if n, _ := kv[i+1].(string); n != "" {
					names = append(names, n)
				}
			}
		}
	}
	slices.Sort(names)
	return names
}
