package doccheck_test

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/stack"
)

// TestMain serves stack.Main's roles: the tests below run the real
// producer and worker as processes of this binary, as a user runs them.
func TestMain(m *testing.M) { stack.Main(m, stack.MainOptions{}) }

// documentedExitCodes reads the codes of docs/cli.md's exit-code table
// (the rows "| N | meaning | for example |" under "## Exit codes").
func documentedExitCodes(t *testing.T) []int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Exit codes\n")
	if !ok {
		t.Fatal("docs/cli.md has no ## Exit codes section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile(`(?m)^\| (\d+) \|`)
	var codes []int
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		n, _ := strconv.Atoi(m[1])
		codes = append(codes, n)
	}
	if len(codes) == 0 {
		t.Fatal("docs/cli.md's exit-code table has no rows")
	}
	return codes
}

// fixture is what the cases run against: a local store with one
// finalized run of an MLP (tuned by the real producer, embedded), an
// empty directory, a verify key that signed nothing, and a closed port.
type fixture struct {
	store, model, empty, pub, closed string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	// The fixture's run is tuned with ONNX Runtime: skipped under -short
	// (make test-short runs before anything is fetched), failed under CI
	// when the library is missing.
	orttest.Need(t)
	dir := t.TempDir()
	f := &fixture{store: "file://" + filepath.Join(dir, "store"), model: "tests.DocMLP", empty: filepath.Join(dir, "empty")}
	if err := os.Mkdir(f.empty, 0o755); err != nil {
		t.Fatal(err)
	}
	onnx := filepath.Join(dir, "mlp.onnx")
	if err := onnxtest.MLP(16, 32, 4).Write(onnx); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "bundle")
	if r := stack.RunProducer(t, nil, "bundle", "from-onnx", onnx, "--out", bundle, "--shape", "input:1x16..4x16", "--model", f.model); r.Code != 0 {
		t.Fatalf("bundle from-onnx: %v", r)
	}
	if r := stack.RunProducer(t, nil, "submit", bundle, "--store", f.store, "--target", "cpu", "--candidates", "ort:cpu:basic",
		"--strategy", "first-wins", "--bench-time", "20ms", "-q"); r.Code != 0 {
		t.Fatalf("submit: %v", r)
	}
	p, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(p)
	if err != nil {
		t.Fatal(err)
	}
	f.pub = filepath.Join(dir, "nobody.pub")
	if err := os.WriteFile(f.pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.closed = l.Addr().String()
	l.Close()
	return f
}

// TestExitCodeTableIsProduced: every code docs/cli.md's exit-code table
// documents is produced by at least one case here, each running the real
// producer on the case the table names and asserting its code; a code
// the table lists that no case produces fails, and so does a case whose
// code the table does not list.
func TestExitCodeTableIsProduced(t *testing.T) {
	f := newFixture(t)
	out := func() string { return filepath.Join(t.TempDir(), "out") }
	cases := []struct {
		code int
		name string // the table's words for the case
		args []string
		want string // in stdout or stderr
	}{
		{0, "ok: fetch lays out the newest good state", []string{"fetch", f.model, "--platform", "cpu", "--out", out(), "--store", f.store}, ""},
		{0, "ok: a local store with no nightly lists none", []string{"nightly", "list", "--store", f.store}, "no nightly in the store"},
		{1, "healthcheck: /healthz did not answer 200", []string{"healthcheck", "http://" + f.closed + "/healthz"}, ""},
		{2, "an unknown command or flag", []string{"fetch", f.model, "--platfrom", "cpu"}, "unknown flag"},
		{2, "a missing flag (only the missing ones are named)", []string{"fetch", f.model, "--platform", "cpu", "--store", f.store, "-o", "json"}, "--out DIR is required"},
		{2, "a model with no latest.json (fetch), with a did-you-mean", []string{"fetch", "tests.DocMPL", "--platform", "cpu", "--out", out(), "--store", f.store}, "did you mean " + f.model},
		{2, "a local --store that does not exist", []string{"history", f.model, "--platform", "cpu", "--store", "file://" + filepath.Join(f.empty, "nosuch")}, "no store at"},
		{2, "a fetch destination that is not new or empty", []string{"fetch", f.model, "--platform", "cpu", "--out", filepath.Dir(f.pub), "--store", f.store}, ""},
		{3, "Redis unreachable", []string{"status", "some-run", "--redis", "redis://" + f.closed + "/0", "--store", f.store}, "unreachable"},
		{4, "fetch: --verify-key refuses the run's provenance", []string{"fetch", f.model, "--platform", "cpu", "--out", out(), "--store", f.store, "--verify-key", f.pub}, "verification failed"},
	}
	produced := map[int]bool{}
	for _, c := range cases {
		t.Run(strconv.Itoa(c.code)+" "+c.name, func(t *testing.T) {
			r := stack.RunProducer(t, nil, c.args...)
			if r.Code != c.code || !strings.Contains(r.Stdout+r.Stderr, c.want) {
				t.Fatalf("producer %s: %v; want exit %d and %q", strings.Join(c.args, " "), r, c.code, c.want)
			}
			produced[c.code] = true
		})
	}
	documented := documentedExitCodes(t)
	for _, code := range documented {
		if !produced[code] {
			t.Errorf("docs/cli.md documents exit %d, and no case here produced it: add one (a command that exits %d as the table says)", code, code)
		}
	}
	for _, c := range cases {
		if !slices.Contains(documented, c.code) {
			t.Errorf("case %q exits %d, which docs/cli.md's exit-code table does not list", c.name, c.code)
		}
	}
}

// TestOutputPurityPromises: docs/cli-grammar.md promises that with -o
// json (or -o jsonl for a stream) stdout and stderr together hold only
// JSON off a terminal (`2>&1 | jq`), and that -q silences progress. Each
// command the promise covers runs here as a process with stderr merged
// into stdout, and what came out must parse as one JSON document (or a
// JSON object a line); a command the doc names must be in this table.
func TestOutputPurityPromises(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "cli-grammar.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, promise := range []string{"`submit --wait -o json 2>&1 \\| jq`", "`status RUN --watch -o jsonl 2>&1 \\| jq`", "`-q` silences them everywhere"} {
		if !strings.Contains(doc, promise) {
			t.Errorf("docs/cli-grammar.md no longer promises %s: update this test with the doc", promise)
		}
	}

	dir := t.TempDir()
	s := stack.New(t, stack.Options{StoreDir: filepath.Join(dir, "store")})
	s.StartWorker(stack.WorkerOptions{})
	onnx := filepath.Join(dir, "mlp.onnx")
	if err := onnxtest.MLP(16, 32, 4).Write(onnx); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "bundle")
	if r := stack.RunProducer(t, nil, "bundle", "from-onnx", onnx, "--out", bundle, "--shape", "input:1x16..4x16", "--model", "tests.Pure"); r.Code != 0 {
		t.Fatalf("bundle from-onnx: %v", r)
	}
	svc := []string{"--redis", s.RedisURL, "--store", s.StoreURL}
	merged := func(args ...string) string {
		t.Helper()
		r := stack.RunProducerMerged(t, s.Env, append(args, svc...)...)
		if r.Code != 0 {
			t.Fatalf("producer %s: %v", strings.Join(args, " "), r)
		}
		return r.Stdout
	}
	oneDocument := func(what, out string) map[string]any {
		t.Helper()
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Errorf("%s 2>&1 is not one JSON document (%v):\n%s", what, err, out)
		}
		m, _ := v.(map[string]any)
		return m
	}

	// submit --wait -o json: the worker tunes it; progress off a terminal
	// is not written, and the result is one document.
	sub := oneDocument("submit --wait -o json", merged("submit", bundle, "--target", s.Queue, "--candidates", "ort:cpu:basic",
		"--strategy", "first-wins", "--bench-time", "20ms", "--wait", "-o", "json"))
	runs, _ := sub["runs"].([]any)
	if len(runs) != 1 {
		t.Fatalf("submit --wait -o json: runs %v", sub["runs"])
	}
	run, _ := runs[0].(map[string]any)["run"].(string)

	// status RUN --watch -o jsonl: one JSON object a line.
	lines := merged("status", run, "--watch", "-o", "jsonl")
	sc := bufio.NewScanner(strings.NewReader(lines))
	n := 0
	for sc.Scan() {
		var v map[string]any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Errorf("status --watch -o jsonl 2>&1: line %q is not a JSON object: %v", sc.Text(), err)
		}
		n++
	}
	if n == 0 {
		t.Errorf("status --watch -o jsonl printed nothing")
	}

	for _, c := range [][]string{
		{"fetch", "tests.Pure", "--platform", s.Queue, "--out", filepath.Join(dir, "fetched"), "-o", "json"},
		{"runs", "-o", "json"},
		{"history", "tests.Pure", "--platform", s.Queue, "-o", "json"},
		{"nightly", "list", "-o", "json"},
		{"status", run, "-o", "json"},
	} {
		out := merged(c...)
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Errorf("%s 2>&1 is not one JSON document (%v):\n%s", strings.Join(c, " "), err, out)
		}
	}

	// A nightly of the same bundle, its plan, summary and report.
	fleet := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(fleet, []byte("format: tunefleet.fleet/v1\ndefaults:\n  targets: ["+s.Queue+"]\n  candidates: [ort:cpu:basic]\n  strategy: first-wins\nmodels:\n  - model: tests.Pure\n    bundle: "+bundle+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := oneDocument("nightly --fleet -o json", merged("nightly", "--fleet", fleet, "--date", "2026-12-01", "-o", "json"))
	nightly, _ := plan["nightly"].(string)
	if nightly == "" {
		t.Fatalf("nightly -o json names no nightly: %v", plan)
	}
	oneDocument("nightly show -o json", merged("nightly", "show", nightly, "-o", "json"))
	oneDocument("nightly report -o json", merged("nightly", "report", nightly, "-o", "json"))

	// -q silences progress: a text submit that waits prints its result
	// and no progress line.
	quiet := merged("submit", bundle, "--target", s.Queue, "--candidates", "ort:cpu:basic", "--strategy", "first-wins",
		"--bench-time", "20ms", "--wait", "--force", "-q")
	if strings.Contains(quiet, "graph 0: pending") || strings.Contains(quiet, "attempt 1") {
		t.Errorf("submit --wait -q 2>&1 printed progress:\n%s", quiet)
	}
}
