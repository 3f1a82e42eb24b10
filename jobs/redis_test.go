package jobs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/jobs"
)

func TestNewRedisClient(t *testing.T) {
	for _, tc := range []struct {
		url  string
		kind string // "single", "failover", "cluster", or "" for an error
		err  string
	}{
		{"redis://127.0.0.1:6379/2", "single", ""},
		{"rediss://user:secret@cache.internal:6380/0", "single", ""},
		{"unix:///run/redis.sock?db=1", "single", ""},
		{"redis+sentinel://s1:26379/0?master_name=mymaster&addr=s2:26379", "failover", ""},
		{"redis+cluster://n1:7000?addr=n2:7000&addr=n3:7000", "cluster", ""},
		{"http://127.0.0.1:6379", "", `unsupported scheme "http"`},
		{"redis+shard://x:1", "", "unsupported scheme"},
		{"redis+sentinel://s1:26379/0", "", "add ?master_name="},
		{"redis://h:1/0?no_such_option=1", "", "no_such_option"},
		{"redis://user:hunter2@h:1/0?bogus=1", "", "xxxxx"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			c, err := jobs.NewRedisClient(tc.url)
			if tc.kind == "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error containing %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("error %q shows the password", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var kind string
			switch c.(type) {
			case *redis.Client:
				kind = "single"
				if strings.Contains(tc.url, "sentinel") {
					kind = "failover"
				}
			case *redis.ClusterClient:
				kind = "cluster"
			}
			if kind != tc.kind {
				t.Fatalf("client %T, want %s", c, tc.kind)
			}
		})
	}
}

func TestConnectRedisUnreachable(t *testing.T) {
	_, err := jobs.ConnectRedis(context.Background(), "redis://:pw@127.0.0.1:1/0")
	if err == nil {
		t.Fatal("connected to a closed port")
	}
	for _, want := range []string{"127.0.0.1:1", "unreachable", "--redis"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), ":pw@") {
		t.Errorf("error %q shows the password", err)
	}
}

func TestRunIDIsDeterministic(t *testing.T) {
	a := jobs.RunID("m", "sha256:1", "cpu", "max-throughput", 0, []string{"ort:cpu:basic"}, "")
	b := jobs.RunID("m", "sha256:1", "cpu", "max-throughput", 0, []string{"ort:cpu:basic"}, "")
	if a != b || !strings.HasPrefix(a, "m-") {
		t.Fatalf("%s != %s", a, b)
	}
	for _, other := range []string{
		jobs.RunID("m", "sha256:2", "cpu", "max-throughput", 0, []string{"ort:cpu:basic"}, ""),
		jobs.RunID("m", "sha256:1", "gpu.h100", "max-throughput", 0, []string{"ort:cpu:basic"}, ""),
		jobs.RunID("m", "sha256:1", "cpu", "latency-budget", 5, []string{"ort:cpu:basic"}, ""),
		jobs.RunID("m", "sha256:1", "cpu", "max-throughput", 0, []string{"ort:cpu:all"}, ""),
		jobs.RunID("m", "sha256:1", "cpu", "max-throughput", 0, []string{"ort:cpu:basic"}, "force"),
	} {
		if other == a {
			t.Fatalf("a different submission got the same run id %s", a)
		}
	}
}

func TestCheckTarget(t *testing.T) {
	for _, ok := range []string{"cpu", "gpu.h100", "gpu.rtx-3090", "e2e_x"} {
		if err := jobs.CheckTarget(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "GPU", "gpu{h100}", "a b", "-x", strings.Repeat("x", 65)} {
		if err := jobs.CheckTarget(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
