package runstate

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The worker registry: which platforms serve which target class, and when
// each was last seen. The nightly producer reads it to know on which
// platforms a graph's result must already be indexed for it to skip the
// graph before enqueuing it.
//
//	tunefleet:classes             set of every class a worker has served
//	tunefleet:platforms:CLASS     sorted set: platform key -> last heartbeat (unix ms)
//	tunefleet:classes:seen        hash: class -> last heartbeat of any of its workers (unix ms)
//
// The hash is never trimmed: a class once served stays known (the target
// class rule, package targetclass, accepts it with no live worker, which
// is what scale-from-zero needs). Every key is used alone, so none needs
// a hash tag to sit in one cluster slot with another.
//
// Entries are not deleted when a worker stops: "served recently" is a
// window on the heartbeat, chosen by the reader. Entries older than
// registryRetention are trimmed by the heartbeats.
const (
	classesKey        = keyPrefix + "classes"
	classesSeenKey    = keyPrefix + "classes:seen"
	registryRetention = 30 * 24 * time.Hour
)

func platformsKey(class string) string { return keyPrefix + "platforms:" + class }

// RegisterPlatforms records that platforms serve each of classes, now.
func RegisterPlatforms(ctx context.Context, rdb redis.UniversalClient, classes, platforms []string, now time.Time) error {
	cut := strconv.FormatInt(now.Add(-registryRetention).UnixMilli(), 10)
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range classes {
			p.SAdd(ctx, classesKey, c)
			p.HSet(ctx, classesSeenKey, c, now.UnixMilli())
			for _, pl := range platforms {
				p.ZAdd(ctx, platformsKey(c), redis.Z{Score: float64(now.UnixMilli()), Member: pl})
			}
			p.ZRemRangeByScore(ctx, platformsKey(c), "-inf", "("+cut)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("register the worker's platforms: %w", err)
	}
	return nil
}

// RecentPlatforms are the platforms that served class since the given
// time, sorted.
func RecentPlatforms(ctx context.Context, rdb redis.UniversalClient, class string, since time.Time) ([]string, error) {
	ps, err := rdb.ZRangeByScore(ctx, platformsKey(class), &redis.ZRangeBy{Min: strconv.FormatInt(since.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("read the platforms serving %s: %w", class, err)
	}
	slices.Sort(ps)
	return ps, nil
}

// KnownClasses are the classes some worker has ever served (within the
// registry's retention), sorted.
func KnownClasses(ctx context.Context, rdb redis.UniversalClient) ([]string, error) {
	cs, err := rdb.SMembers(ctx, classesKey).Result()
	if err != nil {
		return nil, fmt.Errorf("read the classes workers serve: %w", err)
	}
	slices.Sort(cs)
	return cs, nil
}

// ClassesSeen is when a worker of each class it knows last registered:
// every class ever served, including those registered before the hash
// existed (zero time: seen, but not when).
func ClassesSeen(ctx context.Context, rdb redis.UniversalClient) (map[string]time.Time, error) {
	h, err := rdb.HGetAll(ctx, classesSeenKey).Result()
	if err != nil {
		return nil, fmt.Errorf("read when each class was last served: %w", err)
	}
	old, err := rdb.SMembers(ctx, classesKey).Result()
	if err != nil {
		return nil, fmt.Errorf("read the classes workers serve: %w", err)
	}
	seen := make(map[string]time.Time, len(h)+len(old))
	for _, c := range old {
		seen[c] = time.Time{}
	}
	for c, v := range h {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue // not ours to judge: the class is known, its time is not
		}
		seen[c] = time.UnixMilli(ms)
	}
	return seen, nil
}

// Task slots of live workers, for the nightly's expected finish (package
// nightplan): per class, a sorted set of "<worker>=<slots>" -> last
// heartbeat (unix ms). A worker removes its member when it shuts down; a
// worker that died stops counting once its heartbeat is older than the
// reader's window.
func slotsKey(class string) string { return keyPrefix + "slots:" + class }

func slotsMember(worker string, slots int) string { return worker + "=" + strconv.Itoa(slots) }

// RegisterSlots records that worker serves classes with slots task slots, now.
func RegisterSlots(ctx context.Context, rdb redis.UniversalClient, worker string, classes []string, slots int, now time.Time) error {
	cut := strconv.FormatInt(now.Add(-registryRetention).UnixMilli(), 10)
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range classes {
			p.ZAdd(ctx, slotsKey(c), redis.Z{Score: float64(now.UnixMilli()), Member: slotsMember(worker, slots)})
			p.ZRemRangeByScore(ctx, slotsKey(c), "-inf", "("+cut)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("register the worker's task slots: %w", err)
	}
	return nil
}

// UnregisterSlots removes a stopping worker's slots.
func UnregisterSlots(ctx context.Context, rdb redis.UniversalClient, worker string, classes []string, slots int) error {
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, c := range classes {
			p.ZRem(ctx, slotsKey(c), slotsMember(worker, slots))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("unregister the worker's task slots: %w", err)
	}
	return nil
}

// LiveSlots is the task slots of the workers serving class whose
// heartbeat is at or after since.
func LiveSlots(ctx context.Context, rdb redis.UniversalClient, class string, since time.Time) (int, error) {
	ms, err := rdb.ZRangeByScore(ctx, slotsKey(class), &redis.ZRangeBy{Min: strconv.FormatInt(since.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		return 0, fmt.Errorf("read the task slots serving %s: %w", class, err)
	}
	n := 0
	for _, m := range ms {
		i := strings.LastIndexByte(m, '=')
		if s, err := strconv.Atoi(m[i+1:]); i >= 0 && err == nil && s > 0 {
			n += s
		}
	}
	return n, nil
}
