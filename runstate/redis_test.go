package runstate_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
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
			c, err := runstate.NewRedisClient(tc.url)
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
	_, err := runstate.ConnectRedis(context.Background(), "redis://:pw@127.0.0.1:1/0")
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

// TestConnectRedisAsNamesConnections: CLIENT GETNAME on a connection of
// the client answers the name it was given (what CLIENT LIST shows an
// operator), and ConnectRedis's connections have none.
func TestConnectRedisAsNamesConnections(t *testing.T) {
	url := testsvc.Redis(t)
	ctx := context.Background()
	for _, name := range []string{"tunefleet-worker", ""} {
		c, err := runstate.ConnectRedisAs(ctx, url, name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.ClientGetName(ctx).Result()
		c.Close()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		if got != name {
			t.Errorf("CLIENT GETNAME = %q, want %q", got, name)
		}
	}
}
