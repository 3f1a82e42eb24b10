package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
)

// grammarCase is how TestCLIGrammar drives one command: args that name
// something that is not there (not found: exit 2), and args that are
// otherwise well-formed, to which it adds a bad -o or an unknown flag.
type grammarCase struct {
	notFound []string // nil: the command names nothing (notFoundWhy says so)
	why      string
	valid    []string // args that get past cobra's argument check
}

// TestCLIGrammar walks both cobra trees and holds every runnable command
// to docs/cli-grammar.md: -o (if any) is --output, the format; no flag
// that names a directory has a short form; an unknown flag, a bad -o and
// a thing that is not there all exit 2. A new command must be added to
// the table, so it cannot slip by the grammar.
func TestCLIGrammar(t *testing.T) {
	dir := t.TempDir()
	store := "file://" + filepath.Join(dir, "store")
	if err := os.MkdirAll(filepath.Join(dir, "store"), 0o755); err != nil {
		t.Fatal(err)
	}
	redisURL := testsvc.Redis(t)
	missing := filepath.Join(dir, "missing")
	out := filepath.Join(dir, "out")
	_, verifyPub := writeKeyPair(t, dir, "verify", "ed25519")
	cases := map[string]grammarCase{
		"producer bundle from-onnx":     {notFound: []string{missing + ".onnx", "--out", out}, valid: []string{missing, "--out", out}},
		"producer bundle from-testdata": {notFound: []string{missing, "--out", out}, valid: []string{missing, "--out", out}},
		"producer bundle merge":         {notFound: []string{missing, "--out", out}, valid: []string{missing, "--out", out}},
		"producer bundle check":         {notFound: []string{missing}, valid: []string{missing}},
		"producer bundle push":          {notFound: []string{"--store", store, missing}, valid: []string{"--store", store, missing}},
		"producer bundle validate":      {notFound: []string{missing}, valid: []string{missing}},
		"producer bundle":               {why: "a group; its unknown subcommand is bad input", valid: nil},
		"producer fleet":                {why: "a group; its unknown subcommand is bad input", valid: nil},
		"producer store":                {why: "a group; its unknown subcommand is bad input", valid: nil},
		"producer store init":           {why: "makes the store; names nothing", valid: []string{"--store", store}},
		"producer submit":               {notFound: []string{"--store", store, missing, "--target", "cpu", "--strategy", "first-wins", "--candidates", "ort:cpu:basic"}, valid: []string{missing}},
		"producer status":               {notFound: []string{"--redis", redisURL, "status-no-such-run"}, valid: []string{"--redis", redisURL}},
		"producer runs":                 {why: "lists; names nothing", valid: []string{"--redis", redisURL}},
		"producer compare":              {notFound: []string{"--store", store, "no-such-run-a", "no-such-run-b"}, valid: []string{"--store", store, "a", "b"}},
		"producer fetch":                {notFound: []string{"--store", store, "no.Such", "--platform", "cpu", "--out", out}, valid: []string{"--store", store, "no.Such", "--platform", "cpu", "--out", out}},
		"producer verify":               {notFound: []string{missing, "--key", verifyPub}, valid: []string{missing, "--key", verifyPub}},
		"producer cancel":               {notFound: []string{"--redis", redisURL, "cancel-no-such-run"}, valid: []string{"--redis", redisURL, "x"}},
		"producer reconcile":            {notFound: []string{"--redis", redisURL, "reconcile-no-such-run"}, valid: []string{"--redis", redisURL}},
		"producer gc":                   {why: "removes what is old; names nothing", valid: []string{"--store", store}},
		"producer history":              {notFound: []string{"--store", store, "no.Such", "--platform", "cpu"}, valid: []string{"--store", store, "no.Such", "--platform", "cpu"}},
		"producer fleet validate":       {notFound: []string{missing + ".yaml"}, valid: []string{missing}},
		"producer nightly":              {notFound: []string{"--store", store, "--fleet", missing + ".yaml"}, valid: []string{"--fleet", missing}},
		"producer nightly report":       {notFound: []string{"--redis", redisURL, "--store", store, "nightly-no-such"}, valid: []string{"--store", store, "x"}},
		"producer nightly list":         {why: "lists; names nothing", valid: []string{"--store", store}},
		"producer nightly show":         {notFound: []string{"--store", store, "nightly-no-such"}, valid: []string{"--store", store, "x"}},
		"producer serve":                {why: "serves; names nothing", valid: []string{"--listen", "127.0.0.1:0"}},
		"producer healthcheck":          {why: "its contract is 0 on 200, else 1 (a probe)", valid: nil},
		"worker tune":                   {notFound: []string{missing, "--out", out, "--candidates", "ort:cpu:basic", "--strategy", "first-wins"}, valid: []string{missing, "--out", out}},
		"worker run":                    {why: "serves; names nothing", valid: nil},
		"worker info":                   {why: "describes this machine; names nothing", valid: nil},
		"worker trt-log":                {notFound: []string{missing + ".log"}, valid: []string{missing}},
		"worker healthcheck":            {why: "its contract is 0 on 200, else 1 (a probe)", valid: nil},
	}
	seen := map[string]bool{}
	for _, root := range []func() *cobra.Command{cli.NewProducer, cli.NewWorker} {
		for _, c := range runnable(root()) {
			path := c.CommandPath()
			seen[path] = true
			tc, ok := cases[path]
			if !ok {
				t.Errorf("%s is not in TestCLIGrammar's table: add its not-found and bad-input cases", path)
				continue
			}
			rest := strings.Fields(path)[1:]
			run := producer
			if strings.HasPrefix(path, "worker") {
				run = worker
			}
			t.Run(path, func(t *testing.T) {
				hasFormat := false
				c.LocalFlags().VisitAll(func(f *pflag.Flag) {
					if f.Shorthand == "o" && f.Name != "output" {
						t.Errorf("-o is --%s, not --output (the format)", f.Name)
					}
					if f.Name == "output" {
						hasFormat = true
						if f.Shorthand != "o" || !strings.HasPrefix(f.Usage, "output format: ") {
							t.Errorf("--output is -%s %q: want -o, the output format", f.Shorthand, f.Usage)
						}
					}
					if f.Shorthand != "" && (f.Name == "out" || strings.Contains(f.Usage, "directory")) {
						t.Errorf("--%s (%s) names a directory and has the short form -%s: directories have none", f.Name, f.Usage, f.Shorthand)
					}
				})
				args := append(append([]string{}, rest...), tc.valid...)
				run(t, append(args, "--no-such-flag")...).wantCode(t, cli.ExitUsage)
				if hasFormat {
					run(t, append(args, "-o", "yaml")...).wantError(t, strings.Fields(path)[0], cli.ExitUsage, `-o "yaml"`)
				}
				if tc.notFound == nil {
					if tc.why == "" {
						t.Error("no not-found case and no reason why")
					}
					return
				}
				o := run(t, append(append([]string{}, rest...), tc.notFound...)...)
				o.wantCode(t, cli.ExitUsage)
				if _, err := os.Stat(out); err == nil {
					t.Errorf("a not-found %s left %s behind", path, out)
				}
			})
		}
	}
	for path := range cases {
		if !seen[path] {
			t.Errorf("TestCLIGrammar's table has %s, which is no command", path)
		}
	}
}

// runnable is every command under c that runs something, not help or
// shell completion.
func runnable(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	if c.Runnable() && c.HasParent() && c.Name() != "help" && c.Parent().Name() != "completion" && c.Name() != "completion" {
		out = append(out, c)
	}
	for _, s := range c.Commands() {
		out = append(out, runnable(s)...)
	}
	return out
}

// `fetch -o json` is the format: it prints what it laid out as JSON and
// makes no directory named json; the directory is --out's.
// Not parallel: it changes the working directory (t.Chdir).
func TestFetchOutputJSONIsAFormat(t *testing.T) {
	needORT(t)
	dir := t.TempDir()
	store := "file://" + filepath.Join(dir, "store")
	b := filepath.Join(dir, "bundle")
	producer(t, "bundle", "from-onnx", writeMLP(t), "--out", b, "--shape", "input:1x64..4x64", "--model", "tests.Fetch").wantCode(t, cli.ExitOK)
	producer(t, "submit", b, "--target", "cpu", "--candidates", "ort:cpu:basic", "--strategy", "first-wins",
		"--bench-time", benchTime, "--store", store).wantCode(t, cli.ExitOK)
	t.Chdir(dir)
	deploy := filepath.Join(dir, "deploy")
	o := producer(t, "fetch", "tests.Fetch", "--platform", "cpu", "--store", store, "--out", deploy, "-o", "json")
	o.wantCode(t, cli.ExitOK)
	var got struct {
		Dir     string            `json:"dir"`
		Run     string            `json:"run"`
		State   string            `json:"state"`
		Engines map[string]string `json:"engines"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &got); err != nil || got.Run == "" || len(got.Engines) != 1 {
		t.Fatalf("fetch -o json printed %q: %v", o.stdout, err)
	}
	for _, p := range append([]string{got.State}, got.Engines["0"]) {
		if _, err := os.Stat(p); err != nil || !strings.HasPrefix(p, deploy) {
			t.Errorf("%s: %v (want it under %s)", p, err, deploy)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "json")); !os.IsNotExist(err) {
		t.Errorf("fetch -o json made a directory named json: %v", err)
	}
	// Not found is bad input, as in history and status: 2, and nothing laid out.
	o = producer(t, "fetch", "tests.NoSuch", "--platform", "cpu", "--store", store, "--out", filepath.Join(dir, "none"))
	o.wantError(t, "producer", cli.ExitUsage, "tests.NoSuch")
	if _, err := os.Stat(filepath.Join(dir, "none")); !os.IsNotExist(err) {
		t.Errorf("a failed fetch left its --out: %v", err)
	}
}

// `worker tune -o text` is the table (text and table are one format).
func TestTextAndTableAreOneFormat(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"text", "table"} {
		o := worker(t, "tune", filepath.Join(t.TempDir(), "missing"), "--out", filepath.Join(t.TempDir(), "o"), "-o", f,
			"--candidates", "ort:cpu:basic", "--strategy", "first-wins")
		if strings.Contains(o.stderr, "-o") {
			t.Errorf("worker tune -o %s: %s", f, o.stderr)
		}
	}
}

// A --redis that is not a URL is echoed (password hidden, cut to a few
// hundred characters) with the scheme it lacks suggested.
func TestRedisURLWithoutScheme(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		want []string
		not  string
	}{
		{"127.0.0.1:6379", []string{`"127.0.0.1:6379" is not a URL`, `did you mean "redis://127.0.0.1:6379"`}, "<unparsable"},
		{"localhost:6379", []string{`"localhost:6379" is not a URL`, `"redis://localhost:6379"`}, "unsupported scheme"},
		{"admin:s3cret@10.0.0.1:6379", []string{`"xxxxx@10.0.0.1:6379"`, `redis://admin:xxxxx@10.0.0.1:6379`}, "s3cret"},
		{strings.Repeat("h", 10000) + ":6379", []string{"more characters"}, strings.Repeat("h", 1000)},
	} {
		o := producer(t, "--redis", tc.url, "status")
		o.wantError(t, "producer", cli.ExitUsage, tc.want...)
		if strings.Contains(o.stderr, tc.not) || len(o.stderr) > 1500 {
			t.Errorf("--redis %.40q: %d bytes: %.300s", tc.url, len(o.stderr), o.stderr)
		}
	}
}

// A different --bench-time or --warmup, or --find-max-batch, measures
// anew: it is another run, not "already submitted"; the same one again is
// the same run.
func TestBenchTimeMakesANewRun(t *testing.T) {
	t.Parallel()
	needORT(t)
	dir := t.TempDir()
	store := "file://" + filepath.Join(dir, "store")
	b := filepath.Join(dir, "bundle")
	producer(t, "bundle", "from-onnx", writeMLP(t), "--out", b, "--shape", "input:1x64..4x64", "--model", "tests.Bench").wantCode(t, cli.ExitOK)
	submit := func(flag, value string) (run string, created bool) {
		args := []string{"submit", b, "--target", "cpu", "--candidates", "ort:cpu:basic", "--strategy", "first-wins",
			"--store", store, "-o", "json", "--bench-time", "20ms"}
		if flag != "" {
			args = append(args, flag)
		}
		if value != "" {
			args = append(args, value)
		}
		o := producer(t, args...)
		o.wantCode(t, cli.ExitOK)
		var sub struct {
			Submissions []struct {
				Run     string `json:"run"`
				Created bool   `json:"created"`
			} `json:"submissions"`
		}
		if err := json.Unmarshal([]byte(o.stdout), &sub); err != nil || len(sub.Submissions) != 1 {
			t.Fatalf("submit printed %q: %v", o.stdout, err)
		}
		return sub.Submissions[0].Run, sub.Submissions[0].Created
	}
	r1, _ := submit("", "")
	for _, tc := range []struct{ flag, value string }{{"--bench-time", "30ms"}, {"--warmup", "5ms"}, {"--find-max-batch", ""}} {
		r2, created := submit(tc.flag, tc.value)
		if r2 == r1 || !created {
			t.Errorf("%s %s after the first run: run %s (created %v), the first is %s", tc.flag, tc.value, r2, created, r1)
		}
		if r3, created := submit(tc.flag, tc.value); r3 != r2 || created {
			t.Errorf("the same %s again: run %s (created %v), want %s again", tc.flag, r3, created, r2)
		}
	}
}

// `producer store init` makes the bucket with the credentials every other
// command uses, after which the store opens; a second init is no error.
func TestStoreInitMakesTheBucket(t *testing.T) {
	s3 := testsvc.S3(t)
	t.Setenv("AWS_ACCESS_KEY_ID", s3.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3.SecretKey)
	bucket := fmt.Sprintf("init-%d", time.Now().UnixNano())
	store := fmt.Sprintf("s3://%s?endpoint=%s&region=%s", bucket, s3.Endpoint, s3.Region)
	producer(t, "history", "m", "--platform", "cpu", "--store", store).wantError(t, "producer", cli.ExitInternal, "bucket "+bucket+" does not exist", "producer store init")
	o := producer(t, "store", "init", "--store", store)
	o.wantCode(t, cli.ExitOK)
	if !strings.Contains(o.stdout, "created") {
		t.Errorf("first init: %s", o)
	}
	o = producer(t, "store", "init", "--store", store, "-o", "json")
	o.wantCode(t, cli.ExitOK)
	var got struct {
		Created bool `json:"created"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &got); err != nil || got.Created {
		t.Errorf("second init: %s (%v)", o, err)
	}
	// The store is there now: a model it lacks is not found (2), no longer the machine (3).
	producer(t, "history", "m", "--platform", "cpu", "--store", store).wantError(t, "producer", cli.ExitUsage, "no history")
}
