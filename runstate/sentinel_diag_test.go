package runstate_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
)

// TestSentinelAnswerIsReported: with a real redis-sentinel set, a --redis
// URL naming a master the sentinels do not know is reported in the
// sentinel's own words, with the masters it knows, as the URL's mistake
// (ErrBadRedisURL: exit 2), not "is redis-server running?" (what main
// said, the sentinel having answered); the right name connects.
func TestSentinelAnswerIsReported(t *testing.T) {
	set := testsvc.OwnRedisSentinel(t)
	ctx := context.Background()
	good, err := runstate.ConnectRedis(ctx, set.URL)
	if err != nil {
		t.Fatalf("the set's own URL: %v", err)
	}
	good.Close()

	wrong := strings.Replace(set.URL, "master_name="+testsvc.SentinelMaster, "master_name=mymastr", 1)
	if wrong == set.URL {
		t.Fatalf("URL %s names no master_name=%s", set.URL, testsvc.SentinelMaster)
	}
	_, err = runstate.ConnectRedis(ctx, wrong)
	want := `sentinel ` + set.Sentinels[0].Addr + ` knows no master "mymastr" (it knows ` + testsvc.SentinelMaster + `)`
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "is redis-server running") || !errors.Is(err, runstate.ErrBadRedisURL) {
		t.Errorf("wrong master name: %v\nwant %q, marked a bad URL", err, want)
	}
}
