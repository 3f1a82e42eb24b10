package deploycheck

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/ort"
)

// demoBundleInImage is where the producer image keeps the demo bundle
// (producer.Dockerfile); locally it is made by the same `make demo-bundle`.
const demoBundleInImage = "/usr/share/tunefleet/demo/bundle"

// serviceWait bounds each wait for a healthcheck; generous for a loaded
// 2-core machine.
const serviceWait = 2 * time.Minute

// smokeStack runs docker-compose.yml's services as local processes.
type smokeStack struct {
	t       *testing.T
	root    string
	p       *types.Project
	bins    map[string]string // our executables, built from this tree
	paths   map[string]string // container path → local path
	workDir string
	exited  map[string]chan struct{} // closed when a started process has exited
}

// TestStackSmoke starts the compose file's own commands and environments
// as local processes: redis-server and versitygw with the services'
// command lines at the ports they name, the bucket the init service makes,
// a worker-cpu and the one-shot producer with their command lines and
// environments, binaries built from this tree. It waits for each
// healthcheck (the services' own tests) and wants the demo run to finish.
//
// Mapped, because there are no containers: the service host names (redis,
// s3) are 127.0.0.1; 0.0.0.0 listen addresses are 127.0.0.1; the volumes
// and the demo bundle are temporary directories; the ONNX Runtime library
// is this machine's; one worker-cpu replica runs (two would share :8081
// outside their containers); the init service's `mc mb` is made with
// minio-go, the same S3 CreateBucket call, as there is no mc here.
func TestStackSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the stack-smoke test starts redis-server, versitygw, a worker and a producer")
	}
	root := repoRoot(t)
	p, err := LoadCompose(context.Background(), filepath.Join(root, "docker-compose.yml"), filepath.Join(root, ".env.example"), []string{"web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range []string{"6379", "7070", "8081", "8080"} {
		l, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			t.Fatalf("port %s, which docker-compose.yml names, is taken on this machine (%v): stop what listens there", port, err)
		}
		l.Close()
	}
	s := &smokeStack{t: t, root: root, p: p, workDir: t.TempDir(), paths: map[string]string{}, exited: map[string]chan struct{}{}}
	s.buildWithDemoBundle()
	s.server("redis", testsvc.RedisServerBinary(), "/data", "--bind", "127.0.0.1", "--dir")
	s.server("s3", testsvc.VersitygwBinary(), "/data", "")
	s.makeBucket()
	s.ours("worker-cpu", false)
	out := s.ours("producer", true)
	if !strings.Contains(out, "3/3 graph(s) finished (0 failed), done") {
		t.Errorf("the demo run did not end done:\n%s", out)
	}
	// The web profile's UI, with the token .env.example gives it, lists
	// the run the demo made as done.
	s.ours("web", false)
	s.wantRunsPage(out)
}

// wantRunsPage fetches the web service's runs list with its token and
// wants the demo's run on it, done.
func (s *smokeStack) wantRunsPage(producerOut string) {
	run, _, _ := strings.Cut(strings.TrimSpace(producerOut), "\t")
	tok := s.p.Services["web"].Environment["TUNEFLEET_WEB_TOKEN"]
	if tok == nil || run == "" {
		s.t.Fatalf("no token in the web service's environment, or no run id in the producer's output:\n%s", producerOut)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:8080/", nil)
	req.Header.Set("Authorization", "Bearer "+*tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), run) {
		s.t.Errorf("web: GET / with the token: HTTP %d, run %s listed: %v", resp.StatusCode, run, strings.Contains(string(body), run))
	}
}

// buildWithDemoBundle runs `make build demo-bundle` with the binaries and
// the bundle in temporary directories: the recipe producer.Dockerfile runs.
func (s *smokeStack) buildWithDemoBundle() {
	lib, err := ort.FindLibrary("")
	if err != nil {
		testsvc.Missing(s.t, err.Error())
	}
	bin, work := filepath.Join(binDir, "smoke"), filepath.Join(s.workDir, "demo")
	bundle := filepath.Join(work, "bundle")
	// The library found goes in as make variables: the Makefile's own
	// assignment would win over the environment, and its `ort` target
	// would fetch a copy where third_party has none.
	cmd := exec.Command("make", "--no-print-directory", "-C", s.root, "build", "demo-bundle",
		"BIN="+bin, "DEMO_WORK="+work, "DEMO_BUNDLE="+bundle, "ORT_LIB="+lib, ort.LibraryEnv+"="+lib)
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("make build demo-bundle: %v\n%s", err, out)
	}
	s.bins = map[string]string{"producer": filepath.Join(bin, "producer"), "worker": filepath.Join(bin, "worker")}
	s.paths[demoBundleInImage] = bundle
}

// server starts a third-party service with its compose command line, the
// volume at volumeMount mapped to a temporary directory and extra
// arguments appended (redis-server: bind loopback, data in that
// directory), and waits for its healthcheck.
func (s *smokeStack) server(name, exe, volumeMount string, extra ...string) {
	if exe == "" {
		testsvc.Missing(s.t, name+": its server binary is not installed (make redis, make versitygw)")
	}
	svc := s.p.Services[name]
	data := filepath.Join(s.workDir, name)
	if err := os.MkdirAll(data, 0o755); err != nil {
		s.t.Fatal(err)
	}
	s.paths[volumeMount] = data
	args := slices.Clone(svc.Command)
	if len(args) > 0 && filepath.Base(args[0]) == filepath.Base(exe) {
		args = args[1:] // redis's image runs its command; versitygw's image has it as entrypoint
	}
	if last := extra[len(extra)-1]; last == "" {
		extra = extra[:len(extra)-1]
	} else {
		extra = append(extra, data)
	}
	argv := append(s.localArgs(args), extra...)
	s.start(name, exe, argv, svc.Environment)
	s.waitHealthy(name, svc)
}

// ours starts one of our services with its command line and environment;
// with wait, it waits for the process to exit 0 and returns its output,
// otherwise it waits for the healthcheck.
func (s *smokeStack) ours(name string, wait bool) string {
	svc := s.p.Services[name]
	img, err := ParseDockerfile(s.root, relTo(s.root, OurImage(s.p, svc)))
	if err != nil {
		s.t.Fatal(err)
	}
	argv := s.localArgs(ServiceArgv(img, svc))
	exe := s.bins[filepath.Base(argv[0])]
	if !wait {
		s.start(name, exe, argv[1:], svc.Environment)
		s.waitHealthy(name, svc)
		return ""
	}
	cmd := exec.Command(exe, argv[1:]...)
	cmd.Env = s.env(svc.Environment)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		s.t.Fatalf("%s %q: %v\n%s", name, argv, err, out.String())
	}
	s.t.Logf("%s %q:\n%s", name, argv, out.String())
	return out.String()
}

// start runs a long-lived process until the test ends; its output is
// logged when the test fails.
func (s *smokeStack) start(name, exe string, args []string, env types.MappingWithEquals) {
	cmd := exec.Command(exe, args...)
	cmd.Env = s.env(env)
	log, err := os.Create(filepath.Join(s.workDir, name+".log"))
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := testsvc.StartProcess(cmd); err != nil {
		s.t.Fatalf("%s: %v", name, err)
	}
	s.t.Logf("started %s: %s %q", name, exe, args)
	done := make(chan struct{})
	s.exited[name] = done
	go func() { _ = cmd.Wait(); close(done) }()
	s.t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		log.Close()
		if s.t.Failed() {
			b, _ := os.ReadFile(log.Name())
			s.t.Logf("%s log:\n%s", name, b)
		}
	})
}

// waitHealthy polls the service's own healthcheck test until it passes.
func (s *smokeStack) waitHealthy(name string, svc types.ServiceConfig) {
	if svc.HealthCheck == nil || svc.HealthCheck.Disable || len(svc.HealthCheck.Test) < 2 {
		s.t.Fatalf("%s has no healthcheck to wait for", name)
	}
	test := svc.HealthCheck.Test
	var cmdFor func() *exec.Cmd
	switch test[0] {
	case "CMD-SHELL": // the compose file's own shell line, not user data
		cmdFor = func() *exec.Cmd { return exec.Command("sh", "-c", test[1]) }
	case "CMD":
		argv := s.localArgs(test[1:])
		if exe, ok := s.bins[filepath.Base(argv[0])]; ok {
			argv[0] = exe
		}
		cmdFor = func() *exec.Cmd { return exec.Command(argv[0], argv[1:]...) }
	default:
		s.t.Fatalf("%s: healthcheck %q: want CMD or CMD-SHELL", name, test)
	}
	stack.Poll(s.t, serviceWait, name+" healthcheck "+strings.Join(test, " "), func() (bool, string) {
		select {
		case <-s.exited[name]:
			s.t.Fatalf("%s exited before its healthcheck passed", name)
		default:
		}
		cmd := cmdFor()
		cmd.Env = s.env(svc.Environment)
		out, err := cmd.CombinedOutput()
		return err == nil, fmt.Sprintf("%v: %s", err, out)
	})
	s.t.Logf("%s is healthy (%q)", name, test)
}

// makeBucket does what the s3-init service's `mc mb --ignore-existing
// s3/BUCKET` does, with its credentials.
func (s *smokeStack) makeBucket() {
	svc := s.p.Services["s3-init"]
	cmd := svc.Command
	if len(cmd) != 3 || cmd[0] != "mb" || !strings.HasPrefix(cmd[2], "s3/") {
		s.t.Fatalf("s3-init runs %q; the smoke test knows `mb --ignore-existing s3/BUCKET`", cmd)
	}
	env := s.p.Services["s3"].Environment
	c, err := minio.New("127.0.0.1:7070", &minio.Options{Creds: credentials.NewStaticV4(*env["ROOT_ACCESS_KEY"], *env["ROOT_SECRET_KEY"], "")})
	if err != nil {
		s.t.Fatal(err)
	}
	if err := c.MakeBucket(context.Background(), strings.TrimPrefix(cmd[2], "s3/"), minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		s.t.Fatalf("s3-init: %v", err)
	}
}

// localArgs maps a container command line to this machine: ports of
// 0.0.0.0 or all interfaces to loopback, service host names to 127.0.0.1,
// container paths to their local directories.
func (s *smokeStack) localArgs(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		a = s.localValue(a)
		if strings.HasPrefix(a, ":") && isPort(a[1:]) {
			a = "127.0.0.1" + a
		}
		out[i] = strings.Replace(a, "0.0.0.0:", "127.0.0.1:", 1)
	}
	return out
}

func (s *smokeStack) localValue(v string) string {
	v = strings.NewReplacer("//redis:", "//127.0.0.1:", "//s3:", "//127.0.0.1:").Replace(v)
	for from, to := range s.paths {
		if v == from || strings.HasPrefix(v, from+"/") {
			v = to + strings.TrimPrefix(v, from)
		}
	}
	return v
}

// env is a service's environment on this machine, with PATH and the ONNX
// Runtime library (the image's ENV) from the test's own.
func (s *smokeStack) env(m types.MappingWithEquals) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.workDir, "TMPDIR=" + os.TempDir()}
	if lib, err := ort.FindLibrary(""); err == nil {
		env = append(env, ort.LibraryEnv+"="+lib)
	}
	for k, v := range m {
		if v != nil {
			env = append(env, k+"="+s.localValue(*v))
		}
	}
	return env
}

func isPort(s string) bool {
	_, err := net.LookupPort("tcp", s)
	return err == nil && s != ""
}
