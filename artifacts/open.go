package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// URLForms lists the store URLs Open accepts, for help texts and errors.
const URLForms = "a directory (/path, ./path, file:///abs/path, file://relative/path) or " +
	"s3://BUCKET[/PREFIX][?endpoint=http://host:port&region=us-east-1&profile=NAME&insecure=true]"

// s3QueryKeys are the query keys an s3:// URL may carry.
var s3QueryKeys = []string{"endpoint", "region", "profile", "insecure"}

// Open opens the store a URL names and checks it (Check), so a bad URL, an
// unreachable server, a missing bucket or rejected credentials are reported
// here, once, with what to fix:
//
//   - a bare path, file:///abs/path or file://relative/path: a local
//     directory, created when missing;
//   - s3://BUCKET[/PREFIX]?endpoint=…&region=…: S3. The endpoint defaults
//     to TUNEFLEET_S3_ENDPOINT, then S3_ENDPOINT; the region to S3_REGION,
//     then us-east-1. Credentials come from AWS_ACCESS_KEY_ID /
//     AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), else S3_ACCESS_KEY /
//     S3_SECRET_KEY, else the shared credentials file named by
//     TUNEFLEET_S3_CREDENTIALS_FILE or AWS_SHARED_CREDENTIALS_FILE (profile:
//     profile= or AWS_PROFILE). They are never taken from the URL.
func Open(ctx context.Context, rawURL string) (Store, error) {
	return open(ctx, rawURL, true)
}

// OpenExisting is Open for readers (fetch, status): a local directory that
// does not exist is an error wrapping ErrNotExist, not created, so a
// mistyped --store is reported instead of leaving an empty directory; and
// the check writes nothing, so read-only credentials or mounts do.
func OpenExisting(ctx context.Context, rawURL string) (Store, error) {
	return open(ctx, rawURL, false)
}

// ErrBadURL marks a store URL that cannot be parsed: the user's to fix.
var ErrBadURL = errors.New("bad store URL")

func open(ctx context.Context, rawURL string, create bool) (Store, error) {
	loc, err := parseURL(rawURL, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
	}
	if loc.s3 == nil && !create {
		switch fi, err := os.Stat(loc.dir); {
		case errors.Is(err, fs.ErrNotExist) || err == nil && !fi.IsDir():
			return nil, fmt.Errorf("no store at %s (check --store or $TUNEFLEET_STORE): %w", loc.dir, ErrNotExist)
		case err != nil:
			return nil, fmt.Errorf("local store: %w", err) // e.g. no permission: not the user's typo
		}
	}
	var s Store
	if loc.s3 != nil {
		s3, err := NewS3(*loc.s3)
		if err != nil {
			return nil, err
		}
		s = s3
	} else {
		if create {
			if err := os.MkdirAll(loc.dir, 0o755); err != nil {
				return nil, fmt.Errorf("local store: %w", err)
			}
		}
		l, err := NewLocal(loc.dir)
		if err != nil {
			return nil, err
		}
		s = l
	}
	// Readers check without writing: deploy tooling often may only read.
	// (S3's Check only asks: a HEAD of the bucket and a listing.)
	check := s.Check
	if r, ok := s.(interface{ CheckRead(context.Context) error }); ok && !create {
		check = r.CheckRead
	}
	if err := check(ctx); err != nil {
		if c, ok := s.(interface{ Close() error }); ok {
			c.Close()
		}
		return nil, err
	}
	return s, nil
}

// location is a parsed store URL: a directory or an S3 config.
type location struct {
	dir string
	s3  *S3Config
}

// parseURL parses a store URL, taking defaults and credentials from getenv.
func parseURL(raw string, getenv func(string) string) (location, error) {
	if strings.TrimSpace(raw) == "" {
		return location{}, fmt.Errorf("empty store URL: give %s", URLForms)
	}
	scheme, rest, hasScheme := strings.Cut(raw, "://")
	if !hasScheme {
		return location{dir: filepath.Clean(raw)}, nil
	}
	switch strings.ToLower(scheme) {
	case "file":
		return parseFileURL(raw, rest)
	case "s3":
		cfg, err := parseS3URL(raw, getenv)
		if err != nil {
			return location{}, err
		}
		return location{s3: cfg}, nil
	}
	return location{}, fmt.Errorf("store URL %q: unknown scheme %q: give %s", redactURL(raw), scheme, URLForms)
}

// parseFileURL takes file:///abs/path and also the common (non-standard)
// file://relative/path, where "relative" is not a host name.
func parseFileURL(raw, rest string) (location, error) {
	if strings.ContainsAny(rest, "?#") {
		return location{}, fmt.Errorf("store URL %q: a file:// URL takes no query or fragment", raw)
	}
	p, err := url.PathUnescape(rest)
	if err != nil {
		return location{}, fmt.Errorf("store URL %q: %w", raw, err)
	}
	// file://localhost/abs is the absolute /abs.
	if after, ok := strings.CutPrefix(p, "localhost/"); ok {
		p = "/" + after
	}
	if p == "" {
		return location{}, fmt.Errorf("store URL %q names no directory: give file:///abs/path or file://relative/path", raw)
	}
	return location{dir: filepath.Clean(filepath.FromSlash(p))}, nil
}

func parseS3URL(raw string, getenv func(string) string) (*S3Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the whole URL, which may hold a secret.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("store URL %q: %w", redactURL(raw), err)
	}
	if u.User != nil {
		return nil, fmt.Errorf("store URL %q carries credentials: remove them and set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a credentials file) instead", redactURL(raw))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("store URL %q names no bucket: give s3://BUCKET[/PREFIX]", redactURL(raw))
	}
	if u.Fragment != "" {
		return nil, fmt.Errorf("store URL %q: an s3:// URL takes no fragment", redactURL(raw))
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("store URL %q: malformed query: %w", redactURL(raw), err)
	}
	for k, vs := range q {
		if !slices.Contains(s3QueryKeys, k) {
			hint := ""
			if strings.Contains(strings.ToLower(k), "key") || strings.Contains(strings.ToLower(k), "secret") || strings.Contains(strings.ToLower(k), "token") {
				hint = " (credentials never go in the URL: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
			}
			return nil, fmt.Errorf("store URL %q: unknown query key %q%s: accepted keys are %s", redactURL(raw), k, hint, strings.Join(s3QueryKeys, ", "))
		}
		if len(vs) != 1 {
			return nil, fmt.Errorf("store URL %q: query key %q given %d times", redactURL(raw), k, len(vs))
		}
	}
	cfg := &S3Config{
		Endpoint: firstNonEmpty(q.Get("endpoint"), getenv("TUNEFLEET_S3_ENDPOINT"), getenv("S3_ENDPOINT")),
		Bucket:   u.Host,
		Prefix:   strings.Trim(u.Path, "/"),
		Region:   firstNonEmpty(q.Get("region"), getenv("S3_REGION"), DefaultRegion),
		Profile:  firstNonEmpty(q.Get("profile"), getenv("AWS_PROFILE")),
	}
	if v := q.Get("insecure"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("store URL %q: insecure=%q: want true or false", redactURL(raw), v)
		}
		cfg.Insecure = b
	}
	// Credentials: one source, whole; mixing a key from one variable pair
	// with a secret from another would only give a confusing signature error.
	switch {
	case getenv("AWS_ACCESS_KEY_ID") != "" || getenv("AWS_SECRET_ACCESS_KEY") != "":
		cfg.AccessKey, cfg.SecretKey = getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
		cfg.SessionToken = getenv("AWS_SESSION_TOKEN")
		if cfg.AccessKey == "" || cfg.SecretKey == "" {
			return nil, fmt.Errorf("set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither")
		}
	case getenv("S3_ACCESS_KEY") != "" || getenv("S3_SECRET_KEY") != "":
		cfg.AccessKey, cfg.SecretKey = getenv("S3_ACCESS_KEY"), getenv("S3_SECRET_KEY")
		if cfg.AccessKey == "" || cfg.SecretKey == "" {
			return nil, fmt.Errorf("set both S3_ACCESS_KEY and S3_SECRET_KEY, or neither")
		}
	default:
		cfg.CredentialsFile = firstNonEmpty(getenv("TUNEFLEET_S3_CREDENTIALS_FILE"), getenv("AWS_SHARED_CREDENTIALS_FILE"))
	}
	return cfg, nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// redactURL hides a password someone put in a URL, so that an error about
// it does not print it.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// Not parseable: drop everything between "://" and "@".
		if scheme, rest, ok := strings.Cut(raw, "://"); ok {
			if _, host, ok := strings.Cut(rest, "@"); ok {
				return scheme + "://REDACTED@" + host
			}
		}
		return raw
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	// Values of unknown query keys might be secrets someone tried to pass.
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = "REDACTED"
		} else {
			for k := range q {
				if !slices.Contains(s3QueryKeys, k) {
					q[k] = []string{"REDACTED"}
				}
			}
			u.RawQuery = q.Encode()
		}
	}
	return u.String()
}
