package testsvc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"go/build"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tunefleet/tunefleet/artifacts"
)

// readyTimeout bounds how long a server may take to answer. Both answer in
// well under a second; the margin is for loaded CI machines and -race.
const readyTimeout = 30 * time.Second

// stopTimeout is how long a server gets to exit after SIGTERM before SIGKILL.
const stopTimeout = 5 * time.Second

// InCI reports whether the CI environment variable says this is a CI run.
func InCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v != "" && v != "0" && v != "false" && v != "no"
}

// Missing skips (or, in CI, fails) a test whose service is not installed.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s (CI is set, so this fails instead of skipping)", msg)
	}
	t.Skip(msg)
}

// Redis returns the URL of a Redis server for this test: REDIS_URL when set,
// else a redis-server of its own (OwnRedis, nothing persisted).
func Redis(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping a test that needs Redis")
	}
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return OwnRedis(t, RedisOptions{}).URL
}

// RedisOptions configures a redis-server of a test's own.
type RedisOptions struct {
	// Persist keeps every write in an append-only file, fsynced at each
	// write, so a restart (even after a kill) loses nothing.
	Persist bool
	// Password, when set, is required of every client (requirepass), as
	// a deployment's Redis asks of its workers and of KEDA's operator.
	Password string
}

// RedisServer is a redis-server that belongs to one test: the test may
// kill it and start it again on the same port, as an operator or a crash
// would.
type RedisServer struct {
	URL      string // redis://127.0.0.1:PORT/0, or redis://:PASSWORD@127.0.0.1:PORT/0
	Addr     string // 127.0.0.1:PORT
	Password string // RedisOptions.Password
	srv      *server
}

// OwnRedis starts a redis-server of this test's own on a free 127.0.0.1
// port, never the environment's (a test that kills its server must not
// kill a shared one), with no eviction (a queue must never lose keys),
// stopped when the test ends.
func OwnRedis(t testing.TB, opts RedisOptions) *RedisServer {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping a test that needs Redis")
	}
	bin := RedisServerBinary()
	if bin == "" {
		Missing(t, "redis-server not found on PATH or in /usr/bin: install it with `apt-get install redis-server`, or set REDIS_URL")
	}
	dir := t.TempDir()
	extra := []string{"--appendonly", "no"}
	if opts.Persist {
		extra = []string{"--appendonly", "yes", "--appendfsync", "always"}
	}
	if opts.Password != "" {
		extra = append(extra, "--requirepass", opts.Password)
	}
	p := startServer(t, "redis-server", func(port int) *exec.Cmd {
		args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--maxmemory-policy", "noeviction", "--daemonize", "no", "--loglevel", "notice"}
		return exec.Command(bin, append(args, extra...)...)
	}, redisReady)
	addr := fmt.Sprintf("127.0.0.1:%d", p.port)
	u := &url.URL{Scheme: "redis", Host: addr, Path: "/0"}
	if opts.Password != "" {
		u.User = url.UserPassword("", opts.Password)
	}
	return &RedisServer{URL: u.String(), Addr: addr, Password: opts.Password, srv: p}
}

// PID is redis-server's process id (0 while stopped), for a benchmark
// that reads its CPU time from /proc.
func (r *RedisServer) PID() int { return r.srv.pid() }

// Kill ends redis-server with SIGKILL: without Persist, every key is gone.
func (r *RedisServer) Kill() { r.srv.kill() }

// Stop shuts redis-server down with SIGTERM.
func (r *RedisServer) Stop() { r.srv.stop() }

// Start starts a stopped or killed redis-server again on its port (and
// data directory), and waits until it answers PING.
func (r *RedisServer) Start() { r.srv.restart() }

// redisReady sends a raw PING: no client library needed to know it is up.
func redisReady(ctx context.Context, port int) bool {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	// -NOAUTH: a server with a password answered; it is up.
	return err == nil && (strings.HasPrefix(line, "+PONG") || strings.HasPrefix(line, "-NOAUTH"))
}

// S3Server is an S3 endpoint for tests, with root credentials.
type S3Server struct {
	Endpoint, Region, AccessKey, SecretKey string

	client   *minio.Client
	external bool    // from the environment: shared, so buckets are removed after use
	srv      *server // the versitygw this test started; nil when external
}

// StartS3 returns an S3 server for this test: the one S3_ENDPOINT (with
// S3_ACCESS_KEY/S3_SECRET_KEY or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY,
// S3_REGION) names, else a versitygw of its own (OwnS3: posix backend on a
// temporary directory, random root credentials), stopped when the test
// ends. Start one per test and make a bucket per subtest with Bucket.
func StartS3(t testing.TB) *S3Server {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping a test that needs an S3 server")
	}
	if ep := os.Getenv("S3_ENDPOINT"); ep != "" {
		ak := firstNonEmpty(os.Getenv("S3_ACCESS_KEY"), os.Getenv("AWS_ACCESS_KEY_ID"))
		sk := firstNonEmpty(os.Getenv("S3_SECRET_KEY"), os.Getenv("AWS_SECRET_ACCESS_KEY"))
		if ak == "" || sk == "" {
			t.Fatalf("S3_ENDPOINT=%s is set but S3_ACCESS_KEY/S3_SECRET_KEY (or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) are not", ep)
		}
		s := &S3Server{Endpoint: ep, Region: firstNonEmpty(os.Getenv("S3_REGION"), artifacts.DefaultRegion), AccessKey: ak, SecretKey: sk, external: true}
		s.client = newClient(t, s)
		return s
	}
	return OwnS3(t, S3Options{})
}

// S3Options configures a versitygw of a test's own.
type S3Options struct {
	// AccessKey and SecretKey are its root credentials; random when empty.
	AccessKey, SecretKey string
}

// OwnS3 starts a versitygw of this test's own, never the environment's (a
// test that kills or freezes its server must not touch a shared one):
// posix backend on a temporary directory, stopped when the test ends. Kill,
// Start, Freeze and Thaw act on it.
func OwnS3(t testing.TB, opts S3Options) *S3Server {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping a test that needs an S3 server")
	}
	bin := VersitygwBinary()
	if bin == "" {
		Missing(t, "versitygw not found in third_party/bin, on PATH or in $(go env GOPATH)/bin: run `make versitygw`, or set S3_ENDPOINT")
	}
	s := &S3Server{Region: artifacts.DefaultRegion, AccessKey: firstNonEmpty(opts.AccessKey, "tf"+randHex(8)), SecretKey: firstNonEmpty(opts.SecretKey, randHex(20))}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"posix"}
	// versitygw keeps object metadata in user xattrs; where the file system
	// has none (tmpfs on older kernels), a sidecar directory does the job.
	if !hasUserXattrs(data) {
		side := filepath.Join(dir, "meta")
		if err := os.Mkdir(side, 0o755); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--sidecar", side)
	}
	args = append(args, data)
	s.srv = startServer(t, "versitygw", func(port int) *exec.Cmd {
		// --keep-alive: the S3 services tunefleet runs against (AWS,
		// MinIO, Ceph) keep connections open; versitygw closes each after
		// one request unless told otherwise, and a test server that makes
		// every request a TCP connection of its own measures dials.
		cmd := exec.Command(bin, append([]string{"--port", "127.0.0.1:" + strconv.Itoa(port), "--quiet", "--keep-alive"}, args...)...)
		cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
		return cmd
	}, httpReady)
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", s.srv.port)
	s.client = newClient(t, s)
	return s
}

// own is the server process of a versitygw this test started; a shared
// (environment) server cannot be killed or frozen.
func (s *S3Server) own(t testing.TB) *server {
	t.Helper()
	if s.srv == nil {
		t.Fatalf("S3 server %s is shared (S3_ENDPOINT): a test may not kill or freeze it; start one with OwnS3", s.Endpoint)
	}
	return s.srv
}

// PID is the process id of a versitygw this test started (0 for a shared
// one, or while stopped), for a benchmark that reads its CPU time from /proc.
func (s *S3Server) PID() int {
	if s.srv == nil {
		return 0
	}
	return s.srv.pid()
}

// Kill ends versitygw with SIGKILL; its data directory stays.
func (s *S3Server) Kill(t testing.TB) { s.own(t).kill() }

// Start starts a killed versitygw again on its port, with its data.
func (s *S3Server) Start(t testing.TB) { s.own(t).restart() }

// Freeze stops versitygw with SIGSTOP: connections stay open and nothing
// answers, as with a hung server or a long GC pause.
func (s *S3Server) Freeze(t testing.TB) { s.own(t).signal(syscall.SIGSTOP) }

// Thaw resumes a frozen versitygw (SIGCONT).
func (s *S3Server) Thaw(t testing.TB) { s.own(t).signal(syscall.SIGCONT) }

// S3 starts (or finds) an S3 server for this test and returns the config of
// a fresh bucket on it.
func S3(t testing.TB) artifacts.S3Config {
	t.Helper()
	return StartS3(t).Bucket(t)
}

var bucketSeq atomic.Int64

// Bucket makes a new, empty bucket with a unique name and returns the
// config of a store on it. On a shared (environment) server the bucket and
// its objects are removed when the test ends.
func (s *S3Server) Bucket(t testing.TB) artifacts.S3Config {
	t.Helper()
	name := fmt.Sprintf("tf-%d-%s", bucketSeq.Add(1), randHex(6))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.client.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: s.Region}); err != nil {
		t.Fatalf("creating bucket %s at %s: %v", name, s.Endpoint, err)
	}
	if s.external {
		t.Cleanup(func() { s.removeBucket(t, name) })
	}
	return s.Config(name)
}

// Config is the store config for bucket on this server.
func (s *S3Server) Config(bucket string) artifacts.S3Config {
	return artifacts.S3Config{Endpoint: s.Endpoint, Bucket: bucket, Region: s.Region, AccessKey: s.AccessKey, SecretKey: s.SecretKey}
}

func (s *S3Server) removeBucket(t testing.TB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	objs := s.client.ListObjects(ctx, name, minio.ListObjectsOptions{Recursive: true})
	for rerr := range s.client.RemoveObjects(ctx, name, objs, minio.RemoveObjectsOptions{}) {
		t.Logf("removing test bucket %s: %v", name, rerr.Err)
	}
	if err := s.client.RemoveBucket(ctx, name); err != nil {
		t.Logf("removing test bucket %s: %v", name, err)
	}
}

func newClient(t testing.TB, s *S3Server) *minio.Client {
	t.Helper()
	scheme, hostport, ok := strings.Cut(s.Endpoint, "://")
	if !ok || (scheme != "http" && scheme != "https") {
		t.Fatalf("S3 endpoint %q must look like http://host:port", s.Endpoint)
	}
	c, err := minio.New(strings.TrimSuffix(hostport, "/"), &minio.Options{
		Creds:  credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Secure: scheme == "https",
		Region: s.Region,
	})
	if err != nil {
		t.Fatalf("S3 client for %s: %v", s.Endpoint, err)
	}
	return c
}

// httpReady: any HTTP answer (versitygw says 403 to an anonymous GET) means
// the server is up.
func httpReady(ctx context.Context, port int) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", port), nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// findBinary looks for name on PATH, then at the fallback paths.
func findBinary(name string, fallbacks ...string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, p := range fallbacks {
		if isExecutable(p) {
			return p
		}
	}
	return ""
}

// VersitygwBinary is the versitygw OwnS3 starts ("" when there is none):
// the module's third_party/bin first (what `make versitygw` installs, at
// the pinned version), then PATH, then GOBIN and
// GOPATH/bin (a plain `go install`).
func VersitygwBinary() string {
	if root := moduleRoot(); root != "" {
		if p := filepath.Join(root, "third_party", "bin", "versitygw"); isExecutable(p) {
			return p
		}
	}
	var more []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		more = append(more, filepath.Join(gobin, "versitygw"))
	}
	for _, gp := range filepath.SplitList(build.Default.GOPATH) {
		more = append(more, filepath.Join(gp, "bin", "versitygw"))
	}
	return findBinary("versitygw", more...)
}

// moduleRoot walks up from the working directory (a test's package
// directory) to the directory holding go.mod.
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail is the end of a log file: enough to see why a server failed.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	const max = 4 << 10
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return "(empty)"
	}
	return string(b)
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// RedisServerBinary is the redis-server OwnRedis would start ("" when there
// is none), for a test that runs redis-server with a command line of its
// own (the stack-smoke test runs docker-compose.yml's).
func RedisServerBinary() string { return findBinary("redis-server", "/usr/bin/redis-server") }
