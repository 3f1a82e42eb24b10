package redistally_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/internal/testkit/redistally"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
)

// TestTallyBySenderAndScript sends known commands from two named clients
// and one unnamed, a script among them, and checks the tally's rows and
// that its total is what INFO commandstats counted in between.
func TestTallyBySenderAndScript(t *testing.T) {
	srv := testsvc.OwnRedis(t, testsvc.RedisOptions{})
	tally := redistally.Start(t, srv.Addr)
	ctx := context.Background()
	client := func(name string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, ClientName: name})
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := client("alpha"), client("beta")
	plain := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { plain.Close() })
	// Connect each before the counted stretch: their setup is not the
	// commands under test.
	for _, c := range []*redis.Client{a, b, plain} {
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tally.Cut(ctx); err != nil {
		t.Fatal(err)
	}
	script := redis.NewScript(`redis.call('HSET', KEYS[1], 'f', ARGV[1]); redis.call('HGET', KEYS[1], 'f'); return redis.call('INCR', KEYS[2])`)
	for i := range 3 {
		if err := script.Run(ctx, a, []string{"tunefleet:run:{R" + string(rune('0'+i)) + "}", "tunefleet:run:{R}:n"}, "v \"quoted\"\n").Err(); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		b.HSet(ctx, "asynq:{q1}:t:abc", "x", "1")
	}
	plain.Publish(ctx, "tunefleet:wake", "q")
	got, unseen, err := tally.Cut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sig := "evalsha tunefleet:run:{*},tunefleet:run:{*}:n"
	for _, c := range []struct {
		k    redistally.Key
		want int64
	}{
		// The first run is an EVALSHA that answers NOSCRIPT, then an EVAL
		// (whose inner commands are counted under it).
		{redistally.Key{Sender: "alpha", What: sig}, 3},
		{redistally.Key{Sender: "alpha", What: "eval tunefleet:run:{*},tunefleet:run:{*}:n"}, 1},
		{redistally.Key{Sender: "alpha", What: sig, Inner: "hset"}, 2},
		{redistally.Key{Sender: "alpha", What: sig, Inner: "hget"}, 2},
		{redistally.Key{Sender: "alpha", What: sig, Inner: "incr"}, 2},
		{redistally.Key{Sender: "beta", What: "hset asynq:{*}:t:*"}, 2},
		{redistally.Key{Sender: "unnamed", What: "publish tunefleet:wake"}, 1},
	} {
		if got[c.k] != c.want {
			t.Errorf("%+v: %d, want %d (tally %v)", c.k, got[c.k], c.want, got)
		}
	}
	if n := got.Total(); n != 4+9+2+1 {
		t.Errorf("total %d, want 16: %v", n, got)
	}
	// Redis counted the same, by command.
	if len(unseen) != 0 {
		t.Errorf("INFO commandstats counted what the tally did not: %v", unseen)
	}
	// A command MONITOR does not show (an admin one) is reported unseen.
	if err := plain.ConfigGet(ctx, "maxmemory").Err(); err != nil {
		t.Fatal(err)
	}
	if _, unseen, err = tally.Cut(ctx); err != nil {
		t.Fatal(err)
	}
	if unseen["config|get"] != 1 || len(unseen) != 1 {
		t.Errorf("unseen after a CONFIG GET: %v, want config|get 1", unseen)
	}
	var sb strings.Builder
	got.Write(&sb, "", 1)
	if !strings.Contains(sb.String(), "alpha") || !strings.Contains(sb.String(), "hset 2.00") {
		t.Errorf("table:\n%s", sb.String())
	}
}

// TestPattern stars what names a run, a queue, a task or a day.
func TestPattern(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"tunefleet:run:{R1}:graphs", "tunefleet:run:{*}:graphs"},
		{"asynq:{tunefleet:cpu}:t:0a1b", "asynq:{*}:t:*"},
		{"asynq:{q}:processed:2026-01-02", "asynq:{*}:processed:*"},
		{"asynq:{q}:processed", "asynq:{*}:processed"},
		{"tunefleet:wake", "tunefleet:wake"},
		{"tunefleet:lock:models/m/cpu/latest.json", "tunefleet:lock:*"},
	} {
		if got := redistally.Pattern(c.in); got != c.want {
			t.Errorf("Pattern(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
