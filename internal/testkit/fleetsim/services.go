// The night's services: Redis (one server or a Cluster), the store, and
// the target classes' queue names placed over a Cluster's masters.

package fleetsim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/testkit/redistally"
	"github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/state"
)

// services are the night's Redis and store.
type services struct {
	redisURL       string
	tally          *redistally.Tally // Config.Tally
	masters, nodes []string
	storeURL       string
	store          artifacts.Store
	s3PID          int
	proxy          *countingProxy
	env            []string
}

func startServices(tb testing.TB, c Config) *services {
	tb.Helper()
	s := &services{}
	ctx := context.Background()
	switch c.Redis {
	case "single":
		r := testsvc.OwnRedis(tb, testsvc.RedisOptions{})
		s.redisURL, s.masters, s.nodes = r.URL, []string{r.Addr}, []string{r.Addr}
		if c.Tally {
			// Before any client connects: the tally names connections
			// by what they say as they open.
			s.tally = redistally.Start(tb, r.Addr)
		}
	case "cluster":
		cl := testsvc.OwnRedisCluster(tb)
		s.redisURL = cl.URL
		shards, err := cl.Shards(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		for _, sh := range shards {
			s.masters = append(s.masters, sh.Master)
		}
		slices.Sort(s.masters)
		for _, n := range cl.Nodes {
			s.nodes = append(s.nodes, n.Addr)
		}
	default:
		tb.Fatalf("fleetsim: Redis %q (single or cluster)", c.Redis)
	}
	if c.Tally && s.tally == nil {
		tb.Fatalf("fleetsim: a tally of commands by sender needs one Redis (single), not %s", c.Redis)
	}
	switch c.Store {
	case "file":
		dir := tb.TempDir()
		s.storeURL = "file://" + dir
		st, err := artifacts.NewLocal(dir)
		if err != nil {
			tb.Fatal(err)
		}
		s.store = st
	case "s3":
		srv := testsvc.OwnS3(tb, testsvc.S3Options{})
		s.s3PID = srv.PID()
		cfg := srv.Bucket(tb)
		st, err := artifacts.NewS3(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		s.store = st
		s.proxy = startCountingProxy(tb, cfg.Endpoint)
		s.storeURL = fmt.Sprintf("s3://%s?endpoint=%s&region=%s", cfg.Bucket, s.proxy.URL, cfg.Region)
		// Credentials travel in the environment, never in a command line.
		s.env = []string{"AWS_ACCESS_KEY_ID=" + cfg.AccessKey, "AWS_SECRET_ACCESS_KEY=" + cfg.SecretKey}
	default:
		tb.Fatalf("fleetsim: store %q (file or s3)", c.Store)
	}
	return s
}

// queueNames names the night's n target classes. On a Cluster every key
// of an asynq queue carries the queue's name as its hash tag, so a class
// is one slot and one master: the names are chosen (by suffix) so that
// each class's slot is on a master no earlier class uses, while masters
// last, which is how an operator would spread classes over masters.
func queueNames(tb testing.TB, svc *services, base string, n int) []string {
	tb.Helper()
	if n == 1 {
		return []string{base}
	}
	if len(svc.masters) < 2 {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("%s-c%d", base, i)
		}
		return names
	}
	ctx := context.Background()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: svc.nodes})
	defer rdb.Close()
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		tb.Fatalf("CLUSTER SLOTS: %v", err)
	}
	masterOf := func(slot int64) string {
		for _, r := range slots {
			if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 {
				return r.Nodes[0].Addr
			}
		}
		return ""
	}
	used := map[string]int{}
	var names []string
	for i := 0; len(names) < n; i++ {
		name := fmt.Sprintf("%s-c%d", base, i)
		slot, err := rdb.ClusterKeySlot(ctx, name).Result()
		if err != nil {
			tb.Fatalf("CLUSTER KEYSLOT: %v", err)
		}
		m := masterOf(slot)
		// A master takes a second class only once every master has one.
		if used[m] > len(names)/len(svc.masters) {
			continue
		}
		used[m]++
		names = append(names, name)
	}
	return names
}

// nightly runs `producer nightly` over the fleet file (with args, e.g. a
// --date) as a process and returns the plan it printed and the run.
func (svc *services) nightly(tb testing.TB, fleetPath string, args ...string) (state.Plan, stack.Result) {
	tb.Helper()
	r := stack.RunProducer(tb, svc.env, append([]string{"nightly", "--fleet", fleetPath, "--redis", svc.redisURL, "--store", svc.storeURL, "-o", "json", "-q"}, args...)...)
	if r.Code != 0 {
		tb.Fatalf("producer nightly %s: %s", strings.Join(args, " "), r)
	}
	var plan state.Plan
	if err := json.Unmarshal([]byte(r.Stdout), &plan); err != nil {
		tb.Fatalf("producer nightly -o json: %v\n%s", err, r.Stdout)
	}
	return plan, r
}
