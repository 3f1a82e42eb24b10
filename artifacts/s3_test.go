package artifacts_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/artifacts/storetest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
)

func newS3(t *testing.T, cfg artifacts.S3Config) *artifacts.S3 {
	t.Helper()
	s, err := artifacts.NewS3(cfg)
	if err != nil {
		t.Fatalf("NewS3: %v", err)
	}
	return s
}

func TestS3Contract(t *testing.T) {
	t.Parallel()
	srv := testsvc.StartS3(t)
	storetest.Run(t, func(t *testing.T) artifacts.Store { return newS3(t, srv.Bucket(t)) })
}

// With a prefix, a store sees only its own keys and lists them without it.
func TestS3Prefix(t *testing.T) {
	t.Parallel()
	srv := testsvc.StartS3(t)
	cfg := srv.Bucket(t)
	whole := newS3(t, cfg)
	cfg.Prefix = "/team/a/"
	team := newS3(t, cfg)
	if err := artifacts.PutJSON(t.Context(), team, "runs/r1/run.json", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	if err := artifacts.PutJSON(t.Context(), whole, "team/ab/other.json", 2); err != nil {
		t.Fatal(err)
	}
	if got, err := whole.List(t.Context(), ""); err != nil || !slices.Equal(got, []string{"team/a/runs/r1/run.json", "team/ab/other.json"}) {
		t.Fatalf("whole bucket List = %q, %v", got, err)
	}
	if got, err := team.List(t.Context(), ""); err != nil || !slices.Equal(got, []string{"runs/r1/run.json"}) {
		t.Fatalf("prefixed List = %q, %v; want only its own keys, without the prefix", got, err)
	}
	if team.Prefix() != "team/a/" || !strings.Contains(team.String(), cfg.Bucket+"/team/a?") {
		t.Fatalf("Prefix() = %q, String() = %q", team.Prefix(), team.String())
	}
	if _, err := artifacts.NewS3(artifacts.S3Config{Endpoint: cfg.Endpoint, Bucket: cfg.Bucket, Prefix: "a/../b", AccessKey: "k", SecretKey: "s"}); err == nil {
		t.Fatal("a prefix with .. was accepted")
	}
}

func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// Each way a user can misconfigure S3 gives one message naming the fix.
func TestS3CheckErrors(t *testing.T) {
	t.Parallel()
	srv := testsvc.StartS3(t)
	good := srv.Bucket(t)
	unreachable := fmt.Sprintf("http://127.0.0.1:%d", closedPort(t))
	tests := []struct {
		name   string
		mutate func(c *artifacts.S3Config)
		want   []string
	}{
		{"unreachable", func(c *artifacts.S3Config) { c.Endpoint = unreachable }, []string{unreachable, "unreachable", "is the S3 server running"}},
		{"missing-bucket", func(c *artifacts.S3Config) { c.Bucket = "no-such-bucket-here" }, []string{"bucket no-such-bucket-here does not exist at " + good.Endpoint, "create it"}},
		{"wrong-secret", func(c *artifacts.S3Config) { c.SecretKey = "wrong-" + c.SecretKey }, []string{"S3 at " + good.Endpoint + " rejected the credentials", "SignatureDoesNotMatch", "AWS_SECRET_ACCESS_KEY"}},
		{"wrong-access-key", func(c *artifacts.S3Config) { c.AccessKey = "nobody" }, []string{"rejected the credentials", "AWS_ACCESS_KEY_ID"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.mutate(&cfg)
			err := newS3(t, cfg).Check(t.Context())
			if err == nil {
				t.Fatal("Check succeeded")
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Check error %q does not contain %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") || strings.Contains(msg, cfg.SecretKey) {
				t.Errorf("Check error is not one clean line without the secret: %q", msg)
			}
			var se *artifacts.S3Error
			if !errors.As(err, &se) {
				t.Errorf("Check error is %T, want *artifacts.S3Error", err)
			}
		})
	}

	// Operations other than Check classify the same failures.
	cfg := good
	cfg.SecretKey = "wrong"
	err := newS3(t, cfg).Put(t.Context(), "k", strings.NewReader("x"), 1)
	if err == nil || !strings.Contains(err.Error(), "rejected the credentials") {
		t.Errorf("Put with a wrong secret = %v, want \"rejected the credentials\"", err)
	}
}

// s3Env is an environment with every variable parseURL reads unset except
// those given.
func s3Env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestParseStoreURL(t *testing.T) {
	t.Parallel()
	keys := []string{"AWS_ACCESS_KEY_ID", "AK", "AWS_SECRET_ACCESS_KEY", "SECRET1"}
	tests := []struct {
		name    string
		url     string
		env     func(string) string
		wantDir string
		want    *artifacts.S3Config
		wantErr []string // substrings of the error
	}{
		{name: "bare absolute path", url: "/var/lib/tf", env: s3Env(), wantDir: "/var/lib/tf"},
		{name: "bare relative path", url: "out/store/", env: s3Env(), wantDir: "out/store"},
		{name: "file absolute", url: "file:///srv/tf", env: s3Env(), wantDir: "/srv/tf"},
		{name: "file relative", url: "file://rel/dir", env: s3Env(), wantDir: "rel/dir"},
		{name: "file localhost", url: "file://localhost/srv/tf", env: s3Env(), wantDir: "/srv/tf"},
		{name: "file escaped", url: "file:///srv/with%20space", env: s3Env(), wantDir: "/srv/with space"},
		{name: "file query", url: "file:///x?y=1", env: s3Env(), wantErr: []string{"no query"}},
		{name: "file empty", url: "file://", env: s3Env(), wantErr: []string{"names no directory"}},
		{
			name: "s3 full", url: "s3://bucket/a/b?endpoint=http://127.0.0.1:9000&region=eu-west-1",
			env:  s3Env(append(keys, "AWS_SESSION_TOKEN", "TOK")...),
			want: &artifacts.S3Config{Endpoint: "http://127.0.0.1:9000", Bucket: "bucket", Prefix: "a/b", Region: "eu-west-1", AccessKey: "AK", SecretKey: "SECRET1", SessionToken: "TOK"},
		},
		{
			name: "s3 endpoint and region from env", url: "s3://bucket",
			env:  s3Env(append(keys, "S3_ENDPOINT", "http://s3.local:9000", "S3_REGION", "r1")...),
			want: &artifacts.S3Config{Endpoint: "http://s3.local:9000", Bucket: "bucket", Region: "r1", AccessKey: "AK", SecretKey: "SECRET1"},
		},
		{
			name: "TUNEFLEET_S3_ENDPOINT wins over S3_ENDPOINT", url: "s3://bucket/",
			env:  s3Env(append(keys, "S3_ENDPOINT", "http://a:1", "TUNEFLEET_S3_ENDPOINT", "https://b")...),
			want: &artifacts.S3Config{Endpoint: "https://b", Bucket: "bucket", Region: "us-east-1", AccessKey: "AK", SecretKey: "SECRET1"},
		},
		{
			name: "CI variable names", url: "s3://bucket?endpoint=http://h:1",
			env:  s3Env("S3_ACCESS_KEY", "ak2", "S3_SECRET_KEY", "SECRET2"),
			want: &artifacts.S3Config{Endpoint: "http://h:1", Bucket: "bucket", Region: "us-east-1", AccessKey: "ak2", SecretKey: "SECRET2"},
		},
		{
			name: "credentials file and profile", url: "s3://bucket?endpoint=http://h:1&profile=ci",
			env:  s3Env("TUNEFLEET_S3_CREDENTIALS_FILE", "/etc/tf/creds", "AWS_SHARED_CREDENTIALS_FILE", "/other", "AWS_PROFILE", "p"),
			want: &artifacts.S3Config{Endpoint: "http://h:1", Bucket: "bucket", Region: "us-east-1", CredentialsFile: "/etc/tf/creds", Profile: "ci"},
		},
		{
			name: "AWS credentials file, AWS_PROFILE", url: "s3://bucket?endpoint=http://h:1&insecure=true",
			env:  s3Env("AWS_SHARED_CREDENTIALS_FILE", "/other", "AWS_PROFILE", "p"),
			want: &artifacts.S3Config{Endpoint: "http://h:1", Bucket: "bucket", Region: "us-east-1", CredentialsFile: "/other", Profile: "p", Insecure: true},
		},
		{name: "credentials in URL", url: "s3://AKIA:SECRET9@bucket", env: s3Env(), wantErr: []string{"carries credentials", "AWS_ACCESS_KEY_ID"}},
		{name: "secret in query", url: "s3://bucket?secret_key=SECRET9", env: s3Env(), wantErr: []string{"unknown query key \"secret_key\"", "never go in the URL", "endpoint, region, profile, insecure"}},
		{name: "unknown query key", url: "s3://bucket?endpiont=x", env: s3Env(), wantErr: []string{"unknown query key \"endpiont\"", "accepted keys are endpoint, region, profile, insecure"}},
		{name: "repeated key", url: "s3://bucket?region=a&region=b", env: s3Env(), wantErr: []string{"given 2 times"}},
		{name: "bad insecure", url: "s3://bucket?insecure=maybe", env: s3Env(), wantErr: []string{"want true or false"}},
		{name: "no bucket", url: "s3:///prefix", env: s3Env(), wantErr: []string{"names no bucket"}},
		{name: "unknown scheme", url: "gs://bucket/x", env: s3Env(), wantErr: []string{"unknown scheme \"gs\"", "s3://BUCKET", "file:///abs/path"}},
		{name: "half the key pair", url: "s3://bucket", env: s3Env("AWS_ACCESS_KEY_ID", "AK"), wantErr: []string{"both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"}},
		{name: "empty", url: " ", env: s3Env(), wantErr: []string{"empty store URL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, cfg, err := artifacts.ParseURLForTest(tt.url, tt.env)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("parse(%q) succeeded, want an error", tt.url)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				if strings.Contains(err.Error(), "SECRET9") {
					t.Errorf("error %q shows the secret", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse(%q): %v", tt.url, err)
			}
			if dir != filepath.FromSlash(tt.wantDir) {
				t.Errorf("dir = %q, want %q", dir, tt.wantDir)
			}
			if (cfg == nil) != (tt.want == nil) || (cfg != nil && *cfg != *tt.want) {
				t.Errorf("config =\n  %+v\nwant\n  %+v", cfg, tt.want)
			}
		})
	}
}

func TestS3ConfigRedactsSecrets(t *testing.T) {
	t.Parallel()
	cfg := artifacts.S3Config{Endpoint: "http://h:1", Bucket: "bkt", AccessKey: "AK", SecretKey: "TOPSECRET", SessionToken: "TOKENSECRET"}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(format, cfg); strings.Contains(s, "SECRET") {
			t.Errorf("Sprintf(%q) = %q shows a secret", format, s)
		}
	}
	s := newS3(t, cfg)
	if str := s.String(); strings.Contains(str, "SECRET") || strings.Contains(str, "AK") {
		t.Errorf("String() = %q shows credentials", str)
	}
	if want := "s3://bkt?endpoint=http://h:1&region=us-east-1"; s.String() != want {
		t.Errorf("String() = %q, want %q", s.String(), want)
	}
}

func TestNewS3Errors(t *testing.T) {
	t.Parallel()
	base := artifacts.S3Config{Endpoint: "http://h:1", Bucket: "bucket", AccessKey: "ak", SecretKey: "sk"}
	tests := []struct {
		name   string
		mutate func(c *artifacts.S3Config)
		want   string
	}{
		{"no endpoint", func(c *artifacts.S3Config) { c.Endpoint = "" }, "no S3 endpoint"},
		{"endpoint without scheme", func(c *artifacts.S3Config) { c.Endpoint = "h:1" }, "must look like http://host:port"},
		{"endpoint with path", func(c *artifacts.S3Config) { c.Endpoint = "http://h:1/bucket" }, "no path or query"},
		{"endpoint with credentials", func(c *artifacts.S3Config) { c.Endpoint = "http://ak:sk@h:1" }, "must not carry credentials"},
		{"bad bucket name", func(c *artifacts.S3Config) { c.Bucket = "Bad_Bucket" }, "bucket name"},
		{"no secret", func(c *artifacts.S3Config) { c.SecretKey = "" }, "secret key is empty"},
		{"no credentials", func(c *artifacts.S3Config) { c.AccessKey, c.SecretKey = "", "" }, "no S3 credentials"},
		{"missing credentials file", func(c *artifacts.S3Config) {
			c.AccessKey, c.SecretKey, c.CredentialsFile = "", "", "/nonexistent/credentials"
		}, "reading S3 credentials from /nonexistent/credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.mutate(&cfg)
			_, err := artifacts.NewS3(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewS3 = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// clearS3Env unsets every variable Open reads, so the test sees only what
// it sets (CI exports some of them).
func clearS3Env(t *testing.T) {
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "S3_ACCESS_KEY", "S3_SECRET_KEY",
		"TUNEFLEET_S3_CREDENTIALS_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_PROFILE", "S3_ENDPOINT", "TUNEFLEET_S3_ENDPOINT", "S3_REGION"} {
		t.Setenv(k, "")
	}
}

func TestOpenS3(t *testing.T) {
	srv := testsvc.StartS3(t)
	cfg := srv.Bucket(t)
	clearS3Env(t)

	t.Run("environment", func(t *testing.T) {
		t.Setenv("AWS_ACCESS_KEY_ID", cfg.AccessKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", cfg.SecretKey)
		t.Setenv("S3_ENDPOINT", cfg.Endpoint)
		s, err := artifacts.Open(t.Context(), "s3://"+cfg.Bucket+"/p")
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if _, ok := s.(*artifacts.S3); !ok {
			t.Fatalf("Open gave %T", s)
		}
		if strings.Contains(s.String(), cfg.SecretKey) {
			t.Fatalf("String() %q shows the secret", s)
		}
		// String is a URL Open accepts, naming the same store.
		if err := s.Put(t.Context(), "k", strings.NewReader("v"), 1); err != nil {
			t.Fatal(err)
		}
		again, err := artifacts.Open(t.Context(), s.String())
		if err != nil {
			t.Fatalf("Open(String()): %v", err)
		}
		if _, err := again.Stat(t.Context(), "k"); err != nil {
			t.Fatalf("the store Open(String()) names does not have the key: %v", err)
		}
	})

	t.Run("credentials file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "credentials")
		ini := fmt.Sprintf("[default]\naws_access_key_id = nobody\naws_secret_access_key = wrong\n\n[ci]\naws_access_key_id = %s\naws_secret_access_key = %s\n", cfg.AccessKey, cfg.SecretKey)
		if err := os.WriteFile(file, []byte(ini), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("TUNEFLEET_S3_CREDENTIALS_FILE", file)
		if _, err := artifacts.Open(t.Context(), "s3://"+cfg.Bucket+"?endpoint="+cfg.Endpoint+"&profile=ci"); err != nil {
			t.Fatalf("Open with profile ci: %v", err)
		}
		_, err := artifacts.Open(t.Context(), "s3://"+cfg.Bucket+"?endpoint="+cfg.Endpoint)
		if err == nil || !strings.Contains(err.Error(), "rejected the credentials") {
			t.Fatalf("Open with the default profile's wrong keys = %v, want \"rejected the credentials\"", err)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		t.Setenv("S3_ACCESS_KEY", "ak")
		t.Setenv("S3_SECRET_KEY", "sk")
		ep := fmt.Sprintf("http://127.0.0.1:%d", closedPort(t))
		_, err := artifacts.Open(t.Context(), "s3://bucket?endpoint="+ep)
		if err == nil || !strings.Contains(err.Error(), ep) || !strings.Contains(err.Error(), "unreachable") {
			t.Fatalf("Open of a closed port = %v, want \"unreachable\" naming %s", err, ep)
		}
	})
}
