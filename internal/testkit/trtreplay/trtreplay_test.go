package trtreplay_test

import (
	"bytes"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
)

const importPath = "github.com/tunefleet/tunefleet/internal/testkit/trtreplay"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(trtreplay.Env); cfg != "" {
		os.Exit(trtreplay.Main(cfg, os.Args[1:]))
	}
	// Under -race every process sleeps a second at exit (atexit_sleep_ms):
	// without this, each trtexec invocation costs the tests a second.
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	os.Exit(m.Run())
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			if !bytes.Contains(b, []byte("module github.com/tunefleet/tunefleet\n")) {
				t.Fatalf("%s/go.mod is not the tunefleet module", dir)
			}
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.mod above " + wd)
		}
	}
}

// TestOnlyTestsImportThis: the stand-in is never TensorRT anywhere but in
// tests. No Go file of the module outside _test.go files and this package
// imports it (every file, whatever its build tags).
func TestOnlyTestsImportThis(t *testing.T) {
	root := moduleRoot(t)
	bad, checked, err := importers(root, importPath, "internal/testkit/trtreplay")
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d Go files under %s: the walk is broken", checked, root)
	}
	for _, f := range bad {
		// internal/testkit/stack, the test stacks' helpers, may: it is itself
		// imported by tests only (checked below).
		if !strings.HasPrefix(f, stackDir+"/") {
			t.Errorf("%s imports %s: the trtexec stand-in is for tests only", f, importPath)
		}
	}
	// The helpers that bring the stand-in in may be imported by tests and
	// by each other only.
	for _, dir := range testOnlyHelpers {
		bad, _, err = importers(root, "github.com/tunefleet/tunefleet/"+dir, dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range bad {
			if !slices.ContainsFunc(testOnlyHelpers, func(h string) bool { return strings.HasPrefix(f, h+"/") }) {
				t.Errorf("%s imports %s, which brings the trtexec stand-in: it is for tests only", f, dir)
			}
		}
	}
}

// stackDir is the test stacks' helper package, which may import the
// stand-in because only tests import it.
const stackDir = "internal/testkit/stack"

// testOnlyHelpers are the test kit's packages that import stackDir (and so
// the stand-in) from non-test files: each is imported by tests only.
var testOnlyHelpers = []string{stackDir, "internal/testkit/fleetsim"}

// TestImportersFindsOffenders: the check above would see an importer.
func TestImportersFindsOffenders(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	imp := "import _ \"" + importPath + "\"\n"
	write("go.mod", "module github.com/tunefleet/tunefleet\n")
	write("trt/backend.go", "package trt\n\n"+imp)
	write("trt/e2e_test.go", "package trt_test\n\n"+imp)
	write("cmd/worker/main.go", "//go:build ignore\n\npackage main\n\nimport (\n\t\"os\"\n\tr \""+importPath+"\"\n)\n")
	write("internal/testkit/trtreplay/trtreplay.go", "package trtreplay\n\n"+imp)
	write("jobs/worker.go", "package jobs\n\n// "+importPath+" in a comment is no import.\n")
	bad, checked, err := importers(root, importPath, "internal/testkit/trtreplay")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"cmd/worker/main.go", "trt/backend.go"}; !reflect.DeepEqual(bad, want) || checked != 3 {
		t.Errorf("importers = %q (%d checked), want %q (3 checked)", bad, checked, want)
	}
}

// importers lists the non-test Go files under the module at root (but not
// in the package directory self) that import the package pkg,
// slash-separated and relative to root, and how many files it checked.
func importers(root, pkg, self string) ([]string, int, error) {
	self = filepath.Join(root, filepath.FromSlash(self))
	fset := token.NewFileSet()
	var bad []string
	checked := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == root {
				return nil
			}
			name := d.Name()
			if path == self || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" || name == "third_party" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == pkg {
				rel, _ := filepath.Rel(root, path)
				bad = append(bad, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	return bad, checked, err
}

// run starts this test binary as the stand-in.
func run(t *testing.T, env string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(trtreplay.Executable(t), args...)
	cmd.Env = append(os.Environ(), env)
	cmd.Dir = t.TempDir()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

// TestReplay: --help prints the banner; a build replays the log split over
// both streams, writes the plan and exits as configured; the argv is
// recorded.
func TestReplay(t *testing.T) {
	log := trtreplay.Fixture(t, trtreplay.LogPluginNotFound)
	dir := t.TempDir()
	argv := filepath.Join(dir, "argv.jsonl")
	plan := filepath.Join(dir, "model.plan")
	cfg := trtreplay.Config{
		ArgvLog: argv, Banner: "&&&& RUNNING TensorRT.trtexec [TensorRT v101600] [b72]",
		Build: trtreplay.Replay{Log: log}, PlanVersion: [4]byte{10, 16, 0, 72},
	}
	env := trtreplay.WriteConfig(t, cfg)
	out, _, code := run(t, env, "--help")
	if code != 0 || !strings.HasPrefix(out, cfg.Banner+" # ") {
		t.Fatalf("--help: exit %d, %q", code, out)
	}
	out, errs, code := run(t, env, "--onnx="+log, "--saveEngine="+plan)
	if code != 0 {
		t.Fatalf("build exit %d: %s", code, errs)
	}
	want := trtreplay.ReadFixture(t, trtreplay.LogPluginNotFound)
	if len(out)+len(errs) != len(want) || !strings.Contains(errs, "[E]") || strings.Contains(out, "] [E] ") {
		t.Errorf("stdout %d + stderr %d bytes, want the %d of the log with [E] lines on stderr", len(out), len(errs), len(want))
	}
	if got, _ := os.ReadFile(plan); !bytes.Equal(got, trtreplay.Plan(cfg)) || len(got) != trtreplay.PlanSize {
		t.Errorf("plan %x", got)
	}
	// A failing replay writes nothing and exits with its status.
	cfg.Build.Exit = 1
	env = trtreplay.WriteConfig(t, cfg)
	os.Remove(plan)
	if _, _, code := run(t, env, "--onnx="+log, "--saveEngine="+plan); code != 1 {
		t.Errorf("failed build exit %d, want 1", code)
	}
	if _, err := os.Stat(plan); err == nil {
		t.Error("a failed build wrote a plan")
	}
	// Not --name=value: refused, still recorded.
	if _, errs, code := run(t, env, "-onnx", "m.onnx"); code != 3 || !strings.Contains(errs, "not --name[=value]") {
		t.Errorf("bad argv: exit %d, %q", code, errs)
	}
	calls := trtreplay.ReadArgv(t, argv)
	var args [][]string
	for _, c := range calls {
		args = append(args, c.Args)
	}
	wantArgs := [][]string{{"--help"}, {"--onnx=" + log, "--saveEngine=" + plan}, {"--onnx=" + log, "--saveEngine=" + plan}, {"-onnx", "m.onnx"}}
	if !reflect.DeepEqual(args, wantArgs) {
		t.Errorf("recorded %q, want %q", args, wantArgs)
	}
	if calls[1].ONNXSHA256 == "" || calls[0].ONNXSHA256 != "" || calls[1].Dir == "" {
		t.Errorf("recorded %+v", calls)
	}
}
