package cli

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/runstate"
)

// Environment variables behind the global flags.
const (
	RedisEnv = "TUNEFLEET_REDIS"
	StoreEnv = "TUNEFLEET_STORE"
)

// DefaultStore is where artifacts go when neither --store nor
// $TUNEFLEET_STORE says otherwise: a directory beside the caller.
const DefaultStore = "file://tunefleet-data"

// services are the global --redis and --store flags.
type services struct {
	// name names the command's Redis connections (runstate.ConnectRedisAs).
	name    string
	redis   string
	store   string
	signKey string // --sign-key (registerSignKey)
}

// quietRedisLog drops go-redis's own log lines (every failed dial of its
// pool): errors reach the user as values, once, with what to fix.
type quietRedisLog struct{}

func (quietRedisLog) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quietRedisLog{}) }

// register adds --redis and --store to a root command; without says what
// having no Redis means for its commands.
func (s *services) register(cmd *cobra.Command, without string) {
	// The default is read from the environment when used, not shown in
	// --help: the URL may carry a password.
	cmd.PersistentFlags().StringVar(&s.redis, "redis", "",
		"Redis URL: redis://, rediss://, unix://, redis+sentinel://, redis+cluster:// (default $"+RedisEnv+"; "+without+")")
	cmd.PersistentPreRun = func(*cobra.Command, []string) {
		if s.redis == "" {
			s.redis = os.Getenv(RedisEnv)
		}
	}
	def := os.Getenv(StoreEnv)
	if def == "" {
		def = DefaultStore
	}
	cmd.PersistentFlags().StringVar(&s.store, "store", def,
		"artifact store: s3://BUCKET[/PREFIX]?endpoint=URL&region=R or file://DIR ($"+StoreEnv+" sets the default); S3 credentials come from the environment or a credentials file, never from flags")
}

// openStore opens --store for writing (a local directory is created).
func (s *services) openStore(ctx context.Context) (artifacts.Store, error) {
	return storeErr(artifacts.Open(ctx, s.store))
}

// openStoreToRead opens --store for reading: a local directory that does
// not exist is the user's mistake, not something to create.
func (s *services) openStoreToRead(ctx context.Context) (artifacts.Store, error) {
	return storeErr(artifacts.OpenExisting(ctx, s.store))
}

// storeErr marks the user's mistakes (a URL that does not parse, a store
// that is not there) as such; the rest is service trouble.
func storeErr(st artifacts.Store, err error) (artifacts.Store, error) {
	if errors.Is(err, artifacts.ErrBadURL) || errors.Is(err, artifacts.ErrNotExist) {
		return nil, usageErr(err)
	}
	return st, err
}

// storeName is --store as messages show it.
func (s *services) storeName() string { return strings.TrimSuffix(s.store, "/") }

func (s *services) openRedis(ctx context.Context) (redis.UniversalClient, error) {
	// A URL that does not parse is the user's to fix; one that parses but
	// does not answer is service trouble.
	c, err := runstate.ConnectRedisAs(ctx, s.redis, s.name)
	if errors.Is(err, runstate.ErrBadRedisURL) {
		return nil, usageErr(err)
	}
	return c, err
}

// redactArgs hides the password of --redis in a command line that is
// recorded (run.json, state.json provenance).
func redactArgs(args []string) []string {
	out := append([]string{}, args...)
	for i, a := range out {
		switch {
		case a == "--redis" && i+1 < len(out):
			out[i+1] = runstate.Redact(out[i+1])
		case strings.HasPrefix(a, "--redis="):
			out[i] = "--redis=" + runstate.Redact(strings.TrimPrefix(a, "--redis="))
		}
	}
	return out
}
