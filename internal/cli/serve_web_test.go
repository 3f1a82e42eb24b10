package cli_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/web"
)

// `producer serve` refuses what it cannot serve safely or at all, with
// exit 2 and what to fix, before it listens (none of these needs a Redis:
// the one named is never reached).
func TestServeRefusesBadInput(t *testing.T) {
	store := filepath.Join(t.TempDir(), "no-store")
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"store that does not exist", nil, []string{"--store", "file://" + store}, "no store at " + store},
		{"off loopback without credentials", nil, []string{"--store", dir, "--listen", "0.0.0.0:0"}, web.TokenEnv},
		{"all interfaces without credentials", nil, []string{"--store", dir, "--listen", ":0"}, "reachable from other machines"},
		{"half basic auth", map[string]string{web.UserEnv: "ops"}, []string{"--store", dir}, web.PasswordEnv},
		{"no redis", nil, []string{"--store", dir, "--redis", ""}, "needs --redis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			t.Setenv(cli.RedisEnv, "")
			args := append([]string{"serve", "--redis", "redis://127.0.0.1:1/0"}, tc.args...)
			producer(t, args...).wantFailure(t, "producer", cli.ExitUsage, tc.want)
			if _, err := os.Stat(store); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("serve created the store %s: %v", store, err)
			}
		})
	}
}
