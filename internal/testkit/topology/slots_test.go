package topology_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/testkit/topology"
)

// The module's own source keeps every multi-key Redis operation in one
// cluster slot, and checks enough sites that the check means something.
func TestModuleKeysShareASlot(t *testing.T) {
	root := moduleRoot(t)
	rep, err := topology.CheckSlots(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		t.Error(p)
	}
	// runstate's scripts and their calls (10 scripts today): a check that
	// stopped finding them would pass anything.
	if rep.Sites["script"] < 10 || rep.Sites["script call"] < 10 {
		t.Errorf("checked %v: fewer scripts or script calls than runstate has", rep.Sites)
	}
	t.Logf("checked %v", rep.Sites)
}

const keyFuncs = `package p

import (
	"context"

	"github.com/redis/go-redis/v9"
)

const prefix = "tf:"

func runKey(run string) string     { return prefix + "run:{" + run + "}" }
func pendingKey(run string) string { return prefix + "run:{" + run + "}:pending" }
func indexKey() string             { return prefix + "runs" }
func runKeys(run string) []string  { return []string{runKey(run), pendingKey(run)} }

var rdb redis.UniversalClient
`

// Each snippet is added to keyFuncs; want is a part of the one problem it
// must give ("" for none).
func TestCheckSlots(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"script keys share the run's tag", `
var s = redis.NewScript("redis.call('SADD', KEYS[2], ARGV[1]); return redis.call('HGET', KEYS[1], 'x')")
func f(ctx context.Context, run string) { s.Run(ctx, rdb, []string{runKey(run), pendingKey(run)}, 1) }`, ""},
		{"script keys from a key-list function", `
var s = redis.NewScript("for _, k in ipairs(KEYS) do redis.call('EXPIRE', k, 1) end")
func f(ctx context.Context, run string) { s.Run(ctx, rdb, runKeys(run)) }`, ""},
		{"script keys from a local", `
var s = redis.NewScript("return redis.call('DEL', KEYS[1])")
func f(ctx context.Context, name string) { key := prefix + "lock:" + name; s.Run(ctx, rdb, []string{key}) }`, ""},
		{"script source from a constant declared after it", `
var s = redis.NewScript(helperLua + "return twice(redis.call('GET', KEYS[1]))")
func f(ctx context.Context, run string) { s.Run(ctx, rdb, []string{runKey(run)}) }
const helperLua = "local function twice(v) return v .. v end "`, ""},
		{"a later constant's key read is still checked", `
var s = redis.NewScript(helperLua + "return twice(redis.call('GET', KEYS[2]))")
func f(ctx context.Context, run string) { s.Run(ctx, rdb, []string{runKey(run)}) }
const helperLua = "local function twice(v) return v .. v end "`, "undeclared"},
		{"script keys of two slots", `
var s = redis.NewScript("return redis.call('ZADD', KEYS[2], 1, redis.call('GET', KEYS[1]))")
func f(ctx context.Context, run string) { s.Run(ctx, rdb, []string{runKey(run), indexKey()}) }`, "CROSSSLOT"},
		{"script keys of two runs", `
var s = redis.NewScript("return redis.call('GET', KEYS[1]) .. redis.call('GET', KEYS[2])")
func f(ctx context.Context, a, b string) { s.Run(ctx, rdb, []string{runKey(a), runKey(b)}) }`, "CROSSSLOT"},
		{"script touches a key it was not given", `
var s = redis.NewScript("redis.call('SADD', 'tf:runs', ARGV[1]); return redis.call('GET', KEYS[1])")
func f(ctx context.Context, run string) { s.Run(ctx, rdb, []string{runKey(run)}) }`, "only touch the keys it is given in KEYS"},
		{"script builds a key", `
var s = redis.NewScript("return redis.call('GET', KEYS[1] .. ':x')")
func f(ctx context.Context, run string) { s.Run(ctx, rdb, []string{runKey(run)}) }`, "only touch the keys"},
		{"script reads more KEYS than it is given", `
var s = redis.NewScript("return redis.call('GET', KEYS[2])")
func f(ctx context.Context, run string) { s.Run(ctx, rdb, []string{runKey(run)}) }`, "undeclared"},
		{"script keys unreadable", `
var s = redis.NewScript("return redis.call('GET', KEYS[1])")
func f(ctx context.Context, keys []string) { s.Run(ctx, rdb, keys) }`, "cannot read its keys"},
		{"Eval with keys of two slots", `
func f(ctx context.Context, run string) { rdb.Eval(ctx, "return 1", []string{runKey(run), "tf:other"}) }`, "CROSSSLOT"},
		{"Del of one run's keys", `
func f(ctx context.Context, run string) { rdb.Del(ctx, runKey(run), pendingKey(run)); rdb.Del(ctx, runKeys(run)...) }`, ""},
		{"Del of one key", `
func f(ctx context.Context) { rdb.Del(ctx, indexKey()) }`, ""},
		{"Del of two slots", `
func f(ctx context.Context, run string) { rdb.Del(ctx, runKey(run), indexKey()) }`, "CROSSSLOT"},
		{"MGet of two runs", `
func f(ctx context.Context, a, b string) { rdb.MGet(ctx, runKey(a), runKey(b)) }`, "CROSSSLOT"},
		{"MSet of two slots", `
func f(ctx context.Context, run string) { rdb.MSet(ctx, runKey(run), 1, "tf:x", 2) }`, "CROSSSLOT"},
		{"SUnionStore across slots", `
func f(ctx context.Context, run string) { rdb.SUnionStore(ctx, "tf:dst", pendingKey(run)) }`, "CROSSSLOT"},
		{"Rename within a tag", `
func f(ctx context.Context, run string) { rdb.Rename(ctx, runKey(run), runKey(run)+":old") }`, ""},
		{"Rename across slots", `
func f(ctx context.Context, run string) { rdb.Rename(ctx, runKey(run), "tf:old") }`, "CROSSSLOT"},
		{"TxPipelined of one run", `
func f(ctx context.Context, run string) {
	rdb.TxPipelined(ctx, func(p redis.Pipeliner) error { p.HSet(ctx, runKey(run), "a", 1); p.SAdd(ctx, pendingKey(run), "g"); return nil })
}`, ""},
		{"TxPipelined across slots", `
func f(ctx context.Context, run string) {
	rdb.TxPipelined(ctx, func(p redis.Pipeliner) error { p.HSet(ctx, runKey(run), "a", 1); p.ZAdd(ctx, indexKey(), redis.Z{}); return nil })
}`, "CROSSSLOT"},
		{"TxPipeline across slots", `
func f(ctx context.Context, run string) {
	tx := rdb.TxPipeline()
	tx.HSet(ctx, runKey(run), "a", 1)
	tx.Incr(ctx, "tf:counter")
	tx.Exec(ctx)
}`, "CROSSSLOT"},
		{"a plain pipeline is split by slot", `
func f(ctx context.Context, run string) {
	rdb.Pipelined(ctx, func(p redis.Pipeliner) error { p.HSet(ctx, runKey(run), "a", 1); p.ZAdd(ctx, indexKey(), redis.Z{}); return nil })
}`, ""},
		{"not Redis: os.Rename and a header", `
func f(h interface{ Del(string) }) { osRename("a", "b"); h.Del("Content-Length") }
func osRename(a, b string) {}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := topology.CheckPackageSource(map[string][]byte{"p.go": []byte(keyFuncs + tc.src)})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if len(rep.Problems) != 0 {
					t.Fatalf("problems %q, want none", rep.Problems)
				}
				return
			}
			if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], tc.want) {
				t.Fatalf("problems %q, want one mentioning %q", rep.Problems, tc.want)
			}
		})
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = filepath.Dir(dir)
	}
}
