package cli_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
)

func TestMalformedAITuneBlockIsRejectedAtSubmit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		block string
		want  string
	}{
		{"unknown format", `{"format": "aitune.block/v9", "forward_signature": {"parameters": []}, "graphs": {}}`, "format"},
		{"unknown field", `{"format": "aitune.block/v1", "frobnicate": 1}`, "frobnicate"},
		{"graph not in the bundle", `{"format": "aitune.block/v1", "forward_signature": {"parameters": [{"name": "x", "kind": "POSITIONAL_OR_KEYWORD", "has_default": false}]},
		  "graphs": {"7": {"inputs": [], "outputs": [], "output_skeleton": null}}}`, `"7"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := bundletest.Write(t)
			bundletest.EditManifest(t, dir, func(m *bundle.Manifest) { m.AITune = json.RawMessage(tc.block) })
			store := filepath.Join(t.TempDir(), "store")
			// Submitting would run embedded; the block is refused before
			// anything is uploaded.
			o := producer(t, "submit", dir, "--store", "file://"+store)
			o.wantCode(t, cli.ExitUsage)
			if !strings.Contains(o.stderr, "aitune") || !strings.Contains(o.stderr, tc.want) {
				t.Errorf("stderr %q does not name the aitune block and %q", o.stderr, tc.want)
			}
			if entries, _ := os.ReadDir(store); len(entries) > 0 {
				t.Errorf("a refused submission wrote to the store: %v", entries)
			}
			producer(t, "bundle", "validate", dir).wantCode(t, cli.ExitUsage)
		})
	}
}

func TestWorkerInfo(t *testing.T) {
	t.Parallel()
	o := worker(t, "info", "-o", "json")
	o.wantCode(t, cli.ExitOK)
	var info struct {
		Platform    string   `json:"platform"`
		Class       string   `json:"class"`
		Queues      []string `json:"queues"`
		Fingerprint struct {
			Kind string `json:"kind"`
		} `json:"fingerprint"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &info); err != nil {
		t.Fatalf("%v: %s", err, o.stdout)
	}
	// No NVIDIA driver here: a CPU fingerprint serving the cpu queue.
	if info.Fingerprint.Kind != "cpu" || info.Class != "cpu" || len(info.Queues) != 1 || info.Queues[0] != "cpu" || !strings.HasPrefix(info.Platform, "cpu-") {
		t.Fatalf("info %+v", info)
	}
	o = worker(t, "info", "--queues", "cpu,batch", "--class", "cpu.big")
	o.wantCode(t, cli.ExitOK)
	if !strings.Contains(o.stdout, "queues:    cpu, batch") || !strings.Contains(o.stdout, "class:     cpu.big") {
		t.Errorf("text output does not list the queues given:\n%s", o.stdout)
	}
}

func TestTRTLog(t *testing.T) {
	t.Parallel()
	fixtures := trtreplay.FixtureDir(t)
	o := worker(t, "trt-log", filepath.Join(fixtures, "trt10.3-resnet50-fp16-rtxa5000-build-bench.log"), "-o", "json")
	o.wantCode(t, cli.ExitOK)
	for _, want := range []string{"10.3.0", "NVIDIA RTX A5000", "191.317"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("json report does not mention %q", want)
		}
	}
	o = worker(t, "trt-log", filepath.Join(fixtures, "trt10.16-addscalar-plugin-not-found-parse-FAILED.log"))
	o.wantCode(t, cli.ExitOK)
	if !strings.Contains(o.stdout, "AddScalar") || !strings.Contains(o.stdout, "permanent") {
		t.Errorf("text report of a failed build does not classify it:\n%s", o.stdout)
	}
	// A file that is not there is the user's to fix.
	worker(t, "trt-log", filepath.Join(t.TempDir(), "missing.log")).wantCode(t, cli.ExitUsage)
}

func TestRedisPasswordsStayOutOfHelp(t *testing.T) {
	t.Setenv(cli.RedisEnv, "redis://:hunter2@127.0.0.1:1/0")
	o := producer(t, "submit", "--help")
	o.wantCode(t, cli.ExitOK)
	if strings.Contains(o.stdout+o.stderr, "hunter2") {
		t.Fatalf("--help shows the password from $%s", cli.RedisEnv)
	}
	// The environment is still used: this Redis is unreachable, and the
	// message names it without its password.
	dir := bundletest.Write(t)
	o = producer(t, "submit", dir, "--store", "file://"+filepath.Join(t.TempDir(), "s"))
	if o.code == 0 || !strings.Contains(o.stderr, "127.0.0.1:1") || strings.Contains(o.stderr, "hunter2") {
		t.Fatalf("exit %d, stderr %q", o.code, o.stderr)
	}
}

// A submit that cannot run says why, exits 2 or 3, and creates no store:
// embedded submission for a class this machine is not, an unreachable
// Redis, and readers pointed at a store that is not there.
func TestRefusedSubmitLeavesNoStore(t *testing.T) {
	t.Parallel()
	needORT(t)
	dir := bundletest.Write(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"embedded for another class", []string{"submit", dir, "--target", "gpu.nosuch"}, cli.ExitUsage, "without --redis, submit tunes on this machine"},
		{"redis down", []string{"submit", dir, "--target", "cpu", "--redis", "redis://127.0.0.1:1/0"}, cli.ExitInternal, "unreachable"},
		{"fetch from no store", []string{"fetch", "m", "--platform", "cpu", "--out", filepath.Join(t.TempDir(), "out")}, cli.ExitUsage, "no store at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "store")
			o := producer(t, append(tc.args, "--store", "file://"+store)...)
			o.wantFailure(t, "producer", tc.code, tc.want)
			if _, err := os.Stat(store); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the store %s was created: %v", store, err)
			}
		})
	}
}
