package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
)

func TestMain(m *testing.M) {
	// fetch --verify-key records the latest-pointer sequences it has seen
	// ($TUNEFLEET_SEEN): the tests' record, not the home directory's.
	seen, err := os.MkdirTemp("", "tunefleet-seen-")
	if err != nil {
		panic(err)
	}
	os.Setenv(cli.SeenEnv, filepath.Join(seen, "seen.json"))
	code := orttest.Run(m)
	os.RemoveAll(seen)
	if plainMLP.dir != "" {
		os.RemoveAll(plainMLP.dir)
	}
	os.Exit(code)
}

func needORT(t testing.TB) { orttest.Need(t) }

// Sizes of the MLP fixture the producer tests record: input[N,64] →
// output[N,16].
const (
	mlpIn     = 64
	mlpHidden = 32
	mlpOut    = 16
)

// benchTime keeps every benchmark of the worker short.
const benchTime = "20ms"

// outcome is what one in-process run of a CLI did.
type outcome struct {
	args           []string
	code           int
	stdout, stderr string
}

func (o outcome) String() string {
	return fmt.Sprintf("%q: exit %d\n--- stdout:\n%s--- stderr:\n%s", o.args, o.code, o.stdout, o.stderr)
}

func execute(t testing.TB, root *cobra.Command, args ...string) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Execute(root, args, &stdout, &stderr)
	return outcome{args: args, code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// producer runs `producer ARGS...` in process.
func producer(t testing.TB, args ...string) outcome {
	t.Helper()
	return execute(t, cli.NewProducer(), args...)
}

// worker runs `worker ARGS...` in process.
func worker(t testing.TB, args ...string) outcome {
	t.Helper()
	return execute(t, cli.NewWorker(), args...)
}

// wantCode fails the test now unless the run exited with code.
func (o outcome) wantCode(t testing.TB, code int) {
	t.Helper()
	if o.code != code {
		t.Fatalf("want exit %d, got %s", code, o)
	}
}

// wantFailure checks a failed run: exit code, nothing on stdout, and
// stderr that starts "<name>: " and contains every want.
func (o outcome) wantFailure(t testing.TB, name string, code int, want ...string) {
	t.Helper()
	o.wantCode(t, code)
	if o.stdout != "" {
		t.Errorf("stdout is not empty on failure:\n%s", o.stdout)
	}
	if !strings.HasPrefix(o.stderr, name+": ") {
		t.Errorf("stderr does not start with %q: %q", name+": ", o.stderr)
	}
	for _, w := range want {
		if !strings.Contains(o.stderr, w) {
			t.Errorf("stderr does not contain %q: %q", w, o.stderr)
		}
	}
}

// wantError is wantFailure for a failure told in exactly one line on
// stderr: one clear message.
func (o outcome) wantError(t testing.TB, name string, code int, want ...string) {
	t.Helper()
	o.wantFailure(t, name, code, want...)
	if !strings.HasSuffix(o.stderr, "\n") || strings.Count(o.stderr, "\n") != 1 {
		t.Errorf("stderr is not one line: %q", o.stderr)
	}
}

// writeMLP writes the MLP fixture into a new temporary directory.
func writeMLP(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mlp.onnx")
	if err := onnxtest.MLP(mlpIn, mlpHidden, mlpOut).Write(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// mlpBundle makes a bundle from the MLP fixture with `producer bundle
// from-onnx` and returns its directory (a new one: the test may change it).
func mlpBundle(t testing.TB, extra ...string) string {
	t.Helper()
	needORT(t)
	out := filepath.Join(t.TempDir(), "bundle")
	if len(extra) > 0 {
		args := append([]string{"bundle", "from-onnx", writeMLP(t), "--out", out, "--shape", "input:1x64..4x64"}, extra...)
		producer(t, args...).wantCode(t, cli.ExitOK)
		return out
	}
	// Without extra flags the bundle is the same every time (from-onnx is
	// deterministic: TestFromONNXDeterministic), and over twenty tests want
	// it: it is made once per test binary, under -race and with ONNX
	// Runtime computing its reference outputs, and copied for each test.
	plainMLP.once.Do(func() {
		dir, err := os.MkdirTemp("", "tunefleet-cli-test-mlp-")
		if err != nil {
			plainMLP.err = fmt.Errorf("a directory for the shared MLP bundle: %w", err)
			return
		}
		plainMLP.dir = dir
		o := producer(t, "bundle", "from-onnx", writeMLP(t), "--out", filepath.Join(dir, "bundle"), "--shape", "input:1x64..4x64")
		if o.code != cli.ExitOK {
			plainMLP.err = fmt.Errorf("making the shared MLP bundle: %s", o)
		}
	})
	if plainMLP.err != nil {
		t.Fatal(plainMLP.err)
	}
	if err := os.CopyFS(out, os.DirFS(filepath.Join(plainMLP.dir, "bundle"))); err != nil {
		t.Fatalf("copying the shared MLP bundle: %v", err)
	}
	return out
}

// plainMLP is mlpBundle's bundle without extra flags, made once; TestMain
// removes it.
var plainMLP struct {
	once sync.Once
	dir  string
	err  error
}

// summary is what `producer bundle validate -o json` prints.
type summary struct {
	Dir    string `json:"dir"`
	Model  string `json:"model"`
	Digest string `json:"digest"`
	Graphs []struct {
		Name    string   `json:"name"`
		Inputs  []string `json:"inputs"`
		Outputs []string `json:"outputs"`
		Samples int      `json:"samples"`
	} `json:"graphs"`
}

// validate runs `producer bundle validate -o json DIR`, which must succeed.
func validate(t testing.TB, dir string) summary {
	t.Helper()
	o := producer(t, "bundle", "validate", "-o", "json", dir)
	o.wantCode(t, cli.ExitOK)
	var s summary
	dec := json.NewDecoder(strings.NewReader(o.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("validate -o json output does not parse: %v\n%s", err, o.stdout)
	}
	if !strings.HasPrefix(s.Digest, "sha256:") || len(s.Digest) != len("sha256:")+64 {
		t.Errorf("digest %q is not sha256:<hex>", s.Digest)
	}
	return s
}

// entries lists a directory's names, sorted; nil if it does not exist.
func entries(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// wantAbsent fails unless nothing exists at path.
func wantAbsent(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("%s exists after a failed run (err %v); entries: %v", path, err, entries(t, path))
	}
}

// privateTempDir points TMPDIR (the scratch space of the producer's
// reference engine) at a new directory and returns it, so a test can see
// what a run left there. Tests that call it cannot run in parallel.
func privateTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	return dir
}

// wantNoScratch fails if a run left reference scratch space in tmp.
func wantNoScratch(t testing.TB, tmp string) {
	t.Helper()
	for _, e := range entries(t, tmp) {
		if strings.HasPrefix(e, "tunefleet-reference-") {
			t.Errorf("%s left in %s", e, tmp)
		}
	}
}

func TestUnknownCommandsAndNoArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		run  func(testing.TB, ...string) outcome
		args []string
		want string
	}{
		{"producer", producer, []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"producer", producer, []string{"bundle", "from-onnx"}, "accepts 1 arg(s)"},
		{"producer", producer, []string{"bundle", "from-testdata", "a", "b", "--out", "x"}, "accepts 1 arg(s)"},
		{"producer", producer, []string{"bundle", "validate"}, "accepts 1 arg(s)"},
		{"producer", producer, []string{"bundle", "validate", "--bogus", "x"}, "unknown flag: --bogus"},
		{"producer", producer, []string{"bundle", "valdiate", "x"}, `unknown command "valdiate" for "producer bundle"`},
		{"producer", producer, []string{"--store", "ftp://host/x", "fetch", "m", "--platform", "cpu", "--out", "x"}, "bad store URL"},
		{"producer", producer, []string{"--redis", "http://127.0.0.1:1", "status"}, "unsupported scheme"},
		{"worker", worker, []string{"info", "--class", "GPU!"}, "--class"},
		{"worker", worker, []string{"tnue"}, "Did you mean this?\n\ttune"},
		{"worker", worker, []string{"tune", "--out", "x"}, "accepts 1 arg(s)"},
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			tc.run(t, tc.args...).wantFailure(t, tc.name, cli.ExitUsage, tc.want)
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	o := producer(t, "bundle", "from-onnx", "--help")
	o.wantCode(t, cli.ExitOK)
	for _, w := range []string{"--shape", "--samples", "--seed", "--int-range", "      --out"} {
		if !strings.Contains(o.stdout, w) {
			t.Errorf("from-onnx --help does not mention %q:\n%s", w, o.stdout)
		}
	}
	// The checkpoint is named after the aitune block's name, not the model.
	o = producer(t, "fetch", "--help")
	if strings.Contains(o.stdout, "MODEL_NAME") || !strings.Contains(o.stdout, `the aitune block's "name"`) || !strings.Contains(o.stdout, "from aitune.torch import LocalTorchStorage") {
		t.Errorf("fetch --help does not say which name ait.load takes, or how to import LocalTorchStorage:\n%s", o.stdout)
	}
	o = worker(t, "tune", "--help")
	o.wantCode(t, cli.ExitOK)
	for _, w := range []string{"first-wins", "latency-budget", "--candidates", "--bench-time", "ort:cpu:"} {
		if !strings.Contains(o.stdout, w) {
			t.Errorf("tune --help does not mention %q:\n%s", w, o.stdout)
		}
	}
}

func TestExecuteExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		cmd    func() *cobra.Command
		args   []string
		code   int
		stderr string
	}{
		{"success", func() *cobra.Command {
			return &cobra.Command{Use: "tool", RunE: func(cmd *cobra.Command, _ []string) error {
				if cmd.Context() == nil {
					return errors.New("no context")
				}
				return nil
			}}
		}, nil, cli.ExitOK, ""},
		{"plain error is internal", func() *cobra.Command {
			return &cobra.Command{Use: "tool", RunE: func(*cobra.Command, []string) error { return errors.New("disk on fire") }}
		}, nil, cli.ExitInternal, "tool: disk on fire\n"},
		{"EINVAL is internal, not usage", func() *cobra.Command {
			return &cobra.Command{Use: "tool", RunE: func(*cobra.Command, []string) error {
				return fmt.Errorf("write /x: %w", syscall.EINVAL)
			}}
		}, nil, cli.ExitInternal, "tool: write /x: invalid argument\n"},
		{"error about an unknown flag of something else is internal", func() *cobra.Command {
			return &cobra.Command{Use: "tool", RunE: func(*cobra.Command, []string) error {
				return errors.New("trtexec said: unknown flag --foo")
			}}
		}, nil, cli.ExitInternal, "tool: trtexec said: unknown flag --foo\n"},
		{"too few args", func() *cobra.Command {
			return &cobra.Command{Use: "tool", Args: cobra.MinimumNArgs(2), RunE: func(*cobra.Command, []string) error { return nil }}
		}, []string{"a"}, cli.ExitUsage, "tool: requires at least 2 arg(s), only received 1\n"},
		{"too many args", func() *cobra.Command {
			return &cobra.Command{Use: "tool", Args: cobra.MaximumNArgs(0), RunE: func(*cobra.Command, []string) error { return nil }}
		}, []string{"a"}, cli.ExitUsage, "tool: accepts at most 0 arg(s), received 1\n"},
		{"required flag", func() *cobra.Command {
			c := &cobra.Command{Use: "tool", RunE: func(*cobra.Command, []string) error { return nil }}
			c.Flags().String("name", "", "")
			_ = c.MarkFlagRequired("name")
			return c
		}, nil, cli.ExitUsage, "tool: required flag(s) \"name\" not set\n"},
		{"bad flag value", func() *cobra.Command {
			c := &cobra.Command{Use: "tool", RunE: func(*cobra.Command, []string) error { return nil }}
			c.Flags().Int("n", 0, "")
			return c
		}, []string{"--n", "x"}, cli.ExitUsage, `tool: invalid argument "x" for "--n" flag`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := execute(t, tc.cmd(), tc.args...)
			o.wantCode(t, tc.code)
			if tc.stderr == "" && o.stderr != "" || !strings.HasPrefix(o.stderr, tc.stderr) {
				t.Errorf("stderr %q, want %q", o.stderr, tc.stderr)
			}
		})
	}
}
