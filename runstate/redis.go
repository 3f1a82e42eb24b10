package runstate

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/internal/clip"
)

// RedisPasswordEnv overrides the password of the Redis URL, so that it need
// not appear in a command line.
const RedisPasswordEnv = "TUNEFLEET_REDIS_PASSWORD"

// ConnectRedis builds a client from a URL and checks that Redis answers.
//
//	redis://[user:pass@]host:port/db          one server (rediss:// for TLS)
//	unix:///path/to/redis.sock?db=N           one server on a socket
//	redis+sentinel://host:port/db?master_name=M&addr=host2:port   Sentinel
//	redis+cluster://host:port?addr=host2:port                     Cluster
//
// The URL parsers are go-redis's own (asynq's drops sentinel settings).
func ConnectRedis(ctx context.Context, rawURL string) (redis.UniversalClient, error) {
	return ConnectRedisAs(ctx, rawURL, "")
}

// ConnectRedisAs is ConnectRedis with the client's connections named name
// (CLIENT SETNAME, what CLIENT LIST shows; "" for none): `worker run`'s
// are tunefleet-worker (its asynq server's tunefleet-worker/asynq), the
// producer's tunefleet-producer, so that an operator, or a benchmark's
// tally, can tell who sends what.
func ConnectRedisAs(ctx context.Context, rawURL, name string) (redis.UniversalClient, error) {
	c, err := newNamedClient(rawURL, name)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		c.Close()
		if authRefused(err) {
			return nil, badURL{fmt.Errorf("redis at %s refused the password (%v): %s", Redact(rawURL), err, passwordHint(rawURL))}
		}
		// A Sentinel URL: the sentinels may have answered (a master name
		// they do not know); say what they said, not "is it running?".
		if serr := sentinelAnswer(ctx, rawURL); serr != nil {
			return nil, serr
		}
		return nil, fmt.Errorf("redis at %s is unreachable (%v): is redis-server running? check --redis or $TUNEFLEET_REDIS", Redact(rawURL), err)
	}
	return c, nil
}

// authRefused reports whether Redis (or a sentinel) refused the
// connection's credentials: the user's to fix, not a server that is down.
func authRefused(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH") ||
		strings.Contains(msg, "invalid password") || strings.Contains(msg, "invalid username-password")
}

// passwordHint says where each password of a URL goes.
func passwordHint(rawURL string) string {
	if strings.HasPrefix(rawURL, "redis+sentinel:") || strings.HasPrefix(rawURL, "rediss+sentinel:") {
		return "the sentinels' own password goes in the URL's user info (redis+sentinel://:PASSWORD@HOST:26379/…), the master's in ?password= or $" + RedisPasswordEnv
	}
	return "check the password in --redis (redis://:PASSWORD@HOST:6379) or $" + RedisPasswordEnv
}

// ErrBadRedisURL is wrapped by the error of a Redis URL that cannot be
// parsed: the user's to fix, unlike a Redis that does not answer.
var ErrBadRedisURL = errors.New("bad Redis URL")

// badURL keeps a parse error's message and marks it ErrBadRedisURL.
type badURL struct{ error }

func (badURL) Is(target error) bool { return target == ErrBadRedisURL }

// NewRedisClient builds a client without contacting Redis.
func NewRedisClient(rawURL string) (redis.UniversalClient, error) {
	return newNamedClient(rawURL, "")
}

func newNamedClient(rawURL, name string) (redis.UniversalClient, error) {
	c, err := newRedisClient(rawURL, name)
	if err != nil {
		return nil, badURL{err}
	}
	return c, nil
}

func newRedisClient(rawURL, name string) (redis.UniversalClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil || !strings.Contains(rawURL, "://") {
		// "127.0.0.1:6379" does not parse, and "localhost:6379" parses
		// with "localhost" as its scheme: both lack the scheme.
		return nil, fmt.Errorf("--redis %q is not a URL: %s", Redact(rawURL), schemeHint(rawURL))
	}
	scheme, kind, _ := strings.Cut(u.Scheme, "+")
	plain := *u
	plain.Scheme = scheme
	s := plain.String()
	pw := os.Getenv(RedisPasswordEnv)
	switch {
	case kind == "" && (scheme == "redis" || scheme == "rediss" || scheme == "unix"):
		o, err := redis.ParseURL(s)
		if err != nil {
			return nil, fmt.Errorf("--redis %s: %w", Redact(rawURL), err)
		}
		if pw != "" {
			o.Password = pw
		}
		o.ClientName = name
		return redis.NewClient(o), nil
	case kind == "sentinel" && (scheme == "redis" || scheme == "rediss"):
		o, err := redis.ParseFailoverURL(s)
		if err != nil {
			return nil, fmt.Errorf("--redis %s: %w", Redact(rawURL), err)
		}
		if o.MasterName == "" {
			return nil, fmt.Errorf("--redis %s: a Sentinel URL names its master: add ?master_name=NAME", Redact(rawURL))
		}
		if pw != "" {
			o.Password = pw
		}
		o.ClientName = name
		return redis.NewFailoverClient(o), nil
	case kind == "cluster" && (scheme == "redis" || scheme == "rediss"):
		o, err := redis.ParseClusterURL(s)
		if err != nil {
			return nil, fmt.Errorf("--redis %s: %w", Redact(rawURL), err)
		}
		if pw != "" {
			o.Password = pw
		}
		o.ClientName = name
		return redis.NewClusterClient(o), nil
	}
	return nil, fmt.Errorf("--redis %s: unsupported scheme %q (want redis://, rediss://, unix://, redis+sentinel:// or redis+cluster://)", Redact(rawURL), u.Scheme)
}

// schemeHint says what a URL without a scheme lacks, suggesting the
// whole URL with redis:// in front when that would be one.
func schemeHint(rawURL string) string {
	if !strings.Contains(rawURL, "://") {
		if _, err := url.Parse("redis://" + rawURL); err == nil {
			return fmt.Sprintf("it has no scheme: did you mean %q? (redis://, rediss://, unix://, redis+sentinel:// or redis+cluster://)", Redact("redis://"+rawURL))
		}
		return "it has no scheme (want redis://HOST:PORT, rediss://, unix://, redis+sentinel:// or redis+cluster://)"
	}
	return "want redis://HOST:PORT[/DB], rediss://, unix://PATH, redis+sentinel:// or redis+cluster://"
}

// Redact hides the passwords of a URL for messages: the user-info one and
// any query parameter that carries one (password, sentinel_password). A
// URL that does not parse keeps what is before its last "@" hidden (it
// may be a password), and a long one is cut.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || !strings.Contains(rawURL, "://") {
		// Without "://" a password may sit in the opaque part
		// ("user:pw@host:6379"), which Redacted does not hide.
		s := rawURL
		if i := strings.LastIndex(s, "@"); i >= 0 {
			scheme, _, ok := strings.Cut(s[:i], "://")
			s = "xxxxx" + s[i:]
			if ok {
				s = scheme + "://" + s
			}
		}
		return clip.Counted(s, clip.Echo)
	}
	q := u.Query()
	changed := false
	for k := range q {
		if strings.Contains(strings.ToLower(k), "password") {
			q.Set(k, "xxxxx")
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return clip.Counted(u.Redacted(), clip.Echo)
}
