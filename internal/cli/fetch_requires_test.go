package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/tritoncheck"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/triton"
)

// cpuinfoWith is a saved /proc/cpuinfo of an x86-64 machine with flags.
func cpuinfoWith(t *testing.T, flags string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cpuinfo")
	text := "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz\nflags\t\t: " + flags + "\n\n"
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A real ort:cpu:all engine, tuned here, holds ONNX Runtime's NCHWc layout
// padded to this CPU's block: state.json says so per graph, the Triton
// repository carries it (a config.pbtxt parameter Triton's proto parses,
// and graphs.json; signed with the state, so a config edited not to say it
// fails producer verify), and fetch refuses it, writing nothing and exiting 1,
// for a target whose CPU gives ONNX Runtime another block (a platform
// key, a saved cpuinfo) and for a mixed fleet (--portable), while the
// machine that tuned it and a platform of its tier get it.
func TestFetchRefusesEngineTheTargetCannotRun(t *testing.T) {
	t.Parallel()
	block := thisBlock(t)
	// A key and a cpuinfo of the other block than this machine's.
	sameKey, otherKey, otherFlags, otherBlock := "cpu-amd-epyc-9654-avx512-ort1.24.1", "cpu-intel-xeon-e5-2680-v4-avx2-ort1.24.1", "fpu sse4_2 avx avx2 fma", "8"
	if block == 8 {
		sameKey, otherKey, otherFlags, otherBlock = otherKey, sameKey, "fpu sse4_2 avx avx2 fma avx512f avx512bw", "16"
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "convnet.onnx")
	if err := onnxtest.ConvNet().Write(model); err != nil {
		t.Fatal(err)
	}
	b := filepath.Join(dir, "bundle")
	producer(t, "bundle", "from-onnx", model, "--shape", "image:1x3x16x16..4x3x16x16", "--model", "nchwc_net", "--out", b).wantCode(t, cli.ExitOK)
	store := "file://" + filepath.Join(dir, "store")
	key, pub := writeKeyPair(t, dir, "signing", "ed25519")
	producer(t, "submit", b, "--target", "cpu", "--candidates", "ort:cpu:all", "--strategy", "first-wins", "--bench-time", benchTime, "--store", store, "--sign-key", key).wantCode(t, cli.ExitOK)

	// state.json, as fetched.
	plain := filepath.Join(dir, "plain")
	o := producer(t, "fetch", "nchwc_net", "--platform", "cpu", "--store", store, "--out", plain)
	o.wantCode(t, cli.ExitOK)
	if !strings.Contains(o.stdout, "note: graph 0's engine is tied to the hardware that built it (com.microsoft.nchwc; NCHWc block") {
		t.Errorf("fetch does not note the requirement:\n%s", o.stdout)
	}
	var st state.State
	readJSON(t, filepath.Join(plain, "state.json"), &st)
	want := state.NCHWcRequires([]string{state.NCHWcDomain}, runtime.GOARCH, block)
	if len(st.Graphs) != 1 || !reflect.DeepEqual(st.Graphs[0].Requires, want) {
		t.Fatalf("state.json's graphs say they require %+v, want %+v", requiresOf(st), want)
	}
	// And -o json, for deploy scripts.
	o = producer(t, "fetch", "nchwc_net", "--platform", "cpu", "--store", store, "--out", filepath.Join(dir, "json"), "-o", "json")
	o.wantCode(t, cli.ExitOK)
	var got struct {
		Requires map[string]*state.Requires `json:"requires"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &got); err != nil || !reflect.DeepEqual(got.Requires, map[string]*state.Requires{"0": want}) {
		t.Errorf("fetch -o json says requires %+v (%v), want graph 0's %+v:\n%s", got.Requires, err, want, o.stdout)
	}

	// The Triton repository.
	repo := filepath.Join(dir, "repo")
	producer(t, "fetch", "nchwc_net", "--platform", "cpu", "--format", "triton", "--store", store, "--out", repo,
		"--verify-key", pub, "--seen", filepath.Join(dir, "seen.json")).wantCode(t, cli.ExitOK)
	configs := tritoncheck.Repository(t, repo, 0)
	c, ok := configs[triton.ModelName("nchwc_net", "0")]
	if !ok {
		t.Fatalf("no model nchwc_net_0 in %v", configs)
	}
	var inConfig state.Requires
	if err := json.Unmarshal([]byte(c.Parameters[triton.RequiresParameter]), &inConfig); err != nil || !reflect.DeepEqual(&inConfig, want) {
		t.Errorf("config.pbtxt's %s parameter is %q (%v), want %+v", triton.RequiresParameter, c.Parameters[triton.RequiresParameter], err, want)
	}
	var m triton.Map
	readJSON(t, filepath.Join(repo, triton.MapFile), &m)
	if len(m.Graphs) != 1 || !reflect.DeepEqual(m.Graphs[0].Requires, want) {
		t.Errorf("graphs.json: %+v, want requires %+v", m.Graphs, want)
	}

	// The requirement is signed with the state: a repository whose config
	// no longer states it does not verify.
	edited := filepath.Join(t.TempDir(), "edited")
	if err := os.CopyFS(edited, os.DirFS(repo)); err != nil {
		t.Fatal(err)
	}
	producer(t, "verify", edited, "--key", pub).wantCode(t, cli.ExitOK)
	cfgPath := filepath.Join(edited, triton.ModelName("nchwc_net", "0"), triton.ConfigFile)
	text, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.SplitAfter(string(text), "\n") {
		if !strings.Contains(line, triton.RequiresParameter) {
			kept = append(kept, line)
		}
	}
	if len(kept) == len(strings.SplitAfter(string(text), "\n")) {
		t.Fatalf("no %s line in\n%s", triton.RequiresParameter, text)
	}
	if err := os.WriteFile(cfgPath, []byte(strings.Join(kept, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	producer(t, "verify", edited, "--key", pub).wantError(t, "producer", cli.ExitVerify, "verification failed (digest)", "config.pbtxt has sha256", "the signed triton layout")

	for _, tc := range []struct {
		name string
		args []string
		code int
		says []string
	}{
		{"a platform of another NCHWc block", []string{"--for-platform", otherKey}, cli.ExitFailed,
			[]string{"cannot run on platform " + otherKey, "graph 0 (won by ort:cpu:all)", "but ONNX Runtime uses blocks of " + otherBlock, "nothing written: tune it on a worker of that platform", "submit without ort:cpu:all"}},
		{"a saved cpuinfo of another NCHWc block", []string{"--for-cpuinfo", cpuinfoWith(t, otherFlags)}, cli.ExitFailed,
			[]string{"cannot run on the machine of", "but ONNX Runtime uses blocks of " + otherBlock}},
		{"a mixed fleet", []string{"--portable"}, cli.ExitFailed,
			[]string{"cannot run on a fleet of mixed machines (--portable)", "tied to the hardware that built it (com.microsoft.nchwc"}},
		{"the Triton layout for another block", []string{"--format", "triton", "--for-platform", otherKey}, cli.ExitFailed,
			[]string{"cannot run on platform " + otherKey}},
		{"a key that is no platform key", []string{"--for-platform", "cpu"}, cli.ExitUsage, []string{`--for-platform: "cpu" is not a platform key`}},
		{"two targets", []string{"--portable", "--for-this-machine"}, cli.ExitUsage, []string{"give one"}},
		{"this machine", []string{"--for-this-machine"}, cli.ExitOK, nil},
		{"a platform of this tier", []string{"--for-platform", sameKey}, cli.ExitOK, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			o := producer(t, append([]string{"fetch", "nchwc_net", "--platform", "cpu", "--store", store, "--out", out}, tc.args...)...)
			if tc.code == cli.ExitOK {
				o.wantCode(t, cli.ExitOK)
				if _, err := os.Stat(filepath.Join(out, "state.json")); err != nil {
					t.Error(err)
				}
				if strings.Contains(o.stdout, "note:") {
					t.Errorf("a fetch checked for its target still notes the requirement:\n%s", o.stdout)
				}
				return
			}
			o.wantError(t, "producer", tc.code, tc.says...)
			wantAbsent(t, out)
		})
	}
}

func requiresOf(st state.State) []*state.Requires {
	var out []*state.Requires
	for _, g := range st.Graphs {
		out = append(out, g.Requires)
	}
	return out
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// A result reused from the index carries what its engine requires into
// the reusing run's result.json and state.json: the index entry records
// it, and an entry from before it did (no requires, no layout operators
// in the winner's info) has it read from the engine, with the NCHWc block
// of the CPU its platform key names.
func TestReusedResultCarriesRequires(t *testing.T) {
	t.Parallel()
	block := thisBlock(t)
	want := state.NCHWcRequires([]string{state.NCHWcDomain}, runtime.GOARCH, block)
	dir := t.TempDir()
	model := filepath.Join(dir, "convnet.onnx")
	if err := onnxtest.ConvNet().Write(model); err != nil {
		t.Fatal(err)
	}
	b := filepath.Join(dir, "bundle")
	producer(t, "bundle", "from-onnx", model, "--shape", "image:1x3x16x16..4x3x16x16", "--model", "nchwc_net", "--out", b).wantCode(t, cli.ExitOK)
	store := "file://" + filepath.Join(dir, "store")
	submit := []string{"submit", b, "--target", "cpu", "--candidates", "ort:cpu:all", "--strategy", "first-wins", "--bench-time", benchTime, "--store", store}
	producer(t, submit...).wantCode(t, cli.ExitOK)

	entries, _ := filepath.Glob(filepath.Join(dir, "store", "results", "*", "*.json"))
	if len(entries) != 1 {
		t.Fatalf("the result index holds %d entries, want 1: %v", len(entries), entries)
	}
	var entry map[string]any
	readJSON(t, entries[0], &entry)
	raw, _ := json.Marshal(entry["requires"])
	var inEntry state.Requires
	if err := json.Unmarshal(raw, &inEntry); err != nil || !reflect.DeepEqual(&inEntry, want) {
		t.Fatalf("the index entry records requires %s, want %+v", raw, want)
	}

	for _, tc := range []struct {
		name string
		old  bool // the entry as written before requires were kept
	}{{"entry with requires", false}, {"entry from before requires were kept", true}} {
		if tc.old {
			delete(entry, "requires")
			for _, r := range entry["results"].([]any) {
				if info, ok := r.(map[string]any)["info"].(map[string]any); ok {
					delete(info, "hardware_ops")
					delete(info, "nchwc_block")
				}
			}
			data, _ := json.Marshal(entry)
			if err := os.WriteFile(entries[0], data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// --force: a run of its own, whose one graph the index serves.
		producer(t, append(submit, "--force")...).wantCode(t, cli.ExitOK)
		out := filepath.Join(t.TempDir(), "out")
		producer(t, "fetch", "nchwc_net", "--platform", "cpu", "--store", store, "--out", out).wantCode(t, cli.ExitOK)
		var st state.State
		readJSON(t, filepath.Join(out, "state.json"), &st)
		var res struct {
			Reused   bool            `json:"reused"`
			Requires *state.Requires `json:"requires"`
		}
		readJSON(t, filepath.Join(dir, "store", "runs", st.Run, "graphs", "0", "result.json"), &res)
		if !res.Reused {
			t.Fatalf("%s: run %s tuned graph 0 again instead of reusing it", tc.name, st.Run)
		}
		if !reflect.DeepEqual(res.Requires, want) || len(st.Graphs) != 1 || !reflect.DeepEqual(st.Graphs[0].Requires, want) {
			t.Errorf("%s: the reused result requires %+v and state.json %+v, want %+v", tc.name, res.Requires, requiresOf(st), want)
		}
	}
}

// thisBlock is ONNX Runtime's NCHWc block on this machine's CPU; the test
// is skipped where it is not known.
func thisBlock(t *testing.T) int {
	t.Helper()
	needORT(t)
	cpu, err := gpu.DetectCPU("")
	if err != nil {
		t.Fatal(err)
	}
	block := state.NCHWcBlock(runtime.GOARCH, cpu.Flags)
	if block == 0 {
		t.Skipf("ONNX Runtime's NCHWc block on %s is not known here", runtime.GOARCH)
	}
	return block
}
