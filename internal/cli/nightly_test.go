package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
)

// TestNightlyBadInput: each mistake in a fleet file is one clear error,
// exit 2, and nothing submitted (no run in Redis, nothing in the store).
func TestNightlyBadInput(t *testing.T) {
	dir := mlpBundle(t)
	url := testsvc.OwnRedis(t, testsvc.RedisOptions{}).URL
	rdb := redisClient(t, url)
	ctx := context.Background()
	// A cpu worker was seen: cpu is a class some worker serves.
	if err := runstate.RegisterPlatforms(ctx, rdb, []string{"cpu"}, []string{"cpu-test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	good := fmt.Sprintf("format: tunefleet.fleet/v1\ndefaults:\n  targets: [cpu]\n  candidates: [ort:cpu:basic]\nmodels:\n  - model: mlp\n    bundle: %s\n", dir)
	for _, tc := range []struct {
		name, fleet string
		args        []string
		want        []string
	}{
		{"typo'd key", strings.Replace(good, "  targets:", "  tragets:", 1), nil, []string{`fleet.yaml:3:3: defaults.tragets: unknown key "tragets"; did you mean targets?`}},
		{"missing bundle", strings.Replace(good, dir, dir+"-gone", 1), nil, []string{"fleet.yaml:6: ", `model "mlp": bundle:`, "-gone"}},
		{"unknown class", strings.Replace(good, "[cpu]", "[gpu.h10]", 1), nil, []string{`fleet.yaml:6: model "mlp": target class "gpu.h10": no worker has served it and it is not declared`, "(known classes: cpu;"}},
		{"duplicate model", good + fmt.Sprintf("  - model: mlp\n    bundle: %s\n", dir), nil, []string{`fleet.yaml:8:12: models[1].model: model "mlp" is listed twice (first on line 6)`}},
		{"wrong model", strings.Replace(good, "model: mlp", "model: resnet", 1), nil, []string{`bundle ` + dir + ` is model "mlp"`}},
		{"invalid cron spec", good, []string{"--schedule", "0 25 * * *"}, []string{`--schedule "0 25 * * *"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			f := filepath.Join(root, "fleet.yaml")
			if err := os.WriteFile(f, []byte(tc.fleet), 0o644); err != nil {
				t.Fatal(err)
			}
			storeDir := filepath.Join(root, "store")
			args := append([]string{"nightly", "--fleet", f, "--redis", url, "--store", "file://" + storeDir}, tc.args...)
			producer(t, args...).wantError(t, "producer", cli.ExitUsage, tc.want...)
			if entries, _ := os.ReadDir(storeDir); len(entries) != 0 {
				t.Errorf("the store has %v after a refused nightly", entries)
			}
			if n, err := rdb.ZCard(ctx, "tunefleet:runs").Result(); err != nil || n != 0 {
				t.Errorf("Redis has %d run(s) after a refused nightly (%v)", n, err)
			}
			if tc.args == nil && tc.name != "unknown class" {
				// fleet validate says the same, with no service at all.
				producer(t, "fleet", "validate", f).wantError(t, "producer", cli.ExitUsage, tc.want...)
			}
		})
	}
	f := filepath.Join(t.TempDir(), "fleet.yaml")
	os.WriteFile(f, []byte(good), 0o644)
	ok := producer(t, "fleet", "validate", f)
	ok.wantCode(t, cli.ExitOK)
	if !strings.Contains(ok.stdout, "ok, 1 model(s), 1 model x target entries") {
		t.Errorf("validate said %s", ok)
	}
}

// TestNightlySubmitsOncePerNight: the CLI submits the night, prints its
// plan (-o json), and a second call submits nothing new.
func TestNightlySubmitsOncePerNight(t *testing.T) {
	dir := mlpBundle(t)
	url := testsvc.OwnRedis(t, testsvc.RedisOptions{}).URL
	rdb := redisClient(t, url)
	if err := runstate.RegisterPlatforms(context.Background(), rdb, []string{"cpu"}, []string{"cpu-test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "fleet.yaml")
	os.WriteFile(f, []byte(fmt.Sprintf("format: tunefleet.fleet/v1\ndefaults:\n  targets: [cpu]\n  candidates: [ort:cpu:basic]\nmodels:\n  - model: mlp\n    bundle: %s\n", dir)), 0o644)
	store := "file://" + t.TempDir()
	args := []string{"nightly", "--fleet", f, "--redis", url, "--store", store, "--date", "2026-12-01"}
	first := producer(t, append(args, "-o", "json")...)
	first.wantCode(t, cli.ExitOK)
	var plan struct {
		Format  string `json:"format"`
		Nightly string `json:"nightly"`
		Entries []struct {
			Model, Target, Run, Outcome string
			Graphs, Enqueued, Reused    int
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(first.stdout), &plan); err != nil {
		t.Fatalf("plan: %v\n%s", err, first)
	}
	if plan.Format != "tunefleet.nightly/v1" || !strings.HasPrefix(plan.Nightly, "2026-12-01-") || len(plan.Entries) != 1 ||
		plan.Entries[0].Outcome != "submitted" || plan.Entries[0].Enqueued != 1 || plan.Entries[0].Run == "" {
		t.Fatalf("plan %+v", plan)
	}
	again := producer(t, args...)
	again.wantCode(t, cli.ExitOK)
	if want := "nightly " + plan.Nightly + " was submitted before; nothing new"; !strings.Contains(again.stdout, want) {
		t.Errorf("second nightly said %s, want %q", again, want)
	}
	if n, _ := rdb.ZCard(context.Background(), "tunefleet:runs").Result(); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}

// TestNightlyListAndShow: a submitted nightly is listed (table and -o
// json) before and after its morning report, shown summarized now, and a
// nightly with no plan is not found (exit 2).
func TestNightlyListAndShow(t *testing.T) {
	dir := mlpBundle(t)
	url := testsvc.OwnRedis(t, testsvc.RedisOptions{}).URL
	rdb := redisClient(t, url)
	if err := runstate.RegisterPlatforms(context.Background(), rdb, []string{"cpu"}, []string{"cpu-test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "fleet.yaml")
	os.WriteFile(f, []byte(fmt.Sprintf("format: tunefleet.fleet/v1\ndefaults:\n  targets: [cpu]\n  candidates: [ort:cpu:basic]\nmodels:\n  - model: mlp\n    bundle: %s\n", dir)), 0o644)
	store := "file://" + t.TempDir()

	empty := producer(t, "nightly", "list", "--store", store)
	empty.wantCode(t, cli.ExitOK)
	if !strings.Contains(empty.stdout, "no nightly in the store") {
		t.Errorf("empty store: %s", empty)
	}
	sub := producer(t, "nightly", "--fleet", f, "--redis", url, "--store", store, "--date", "2026-12-01", "-o", "json")
	sub.wantCode(t, cli.ExitOK)
	var plan struct{ Nightly string }
	if err := json.Unmarshal([]byte(sub.stdout), &plan); err != nil {
		t.Fatal(err)
	}

	type listed struct {
		Nightly   string `json:"nightly"`
		Models    int    `json:"models"`
		Submitted int    `json:"submitted"`
		Totals    *struct {
			Pending int `json:"pending"`
		} `json:"totals"`
	}
	list := func() []listed {
		t.Helper()
		o := producer(t, "nightly", "list", "--store", store, "-o", "json")
		o.wantCode(t, cli.ExitOK)
		var out []listed
		if err := json.Unmarshal([]byte(o.stdout), &out); err != nil {
			t.Fatalf("list -o json: %v\n%s", err, o)
		}
		return out
	}
	if got := list(); len(got) != 1 || got[0].Nightly != plan.Nightly || got[0].Models != 1 || got[0].Submitted != 1 || got[0].Totals != nil {
		t.Fatalf("list before the report: %+v", got)
	}
	table := producer(t, "nightly", "list", "--store", store, "-o", "table")
	table.wantCode(t, cli.ExitOK)
	for _, want := range []string{"NIGHTLY", plan.Nightly, "no report yet"} {
		if !strings.Contains(table.stdout, want) {
			t.Errorf("list table lacks %q:\n%s", want, table)
		}
	}

	// No worker serves cpu here: the run is pending.
	show := producer(t, "nightly", "show", plan.Nightly, "--store", store, "-o", "json")
	show.wantCode(t, cli.ExitOK)
	var s struct {
		Nightly string `json:"nightly"`
		Totals  struct{ Entries, Pending int }
		Entries []struct{ Model, Status string }
	}
	if err := json.Unmarshal([]byte(show.stdout), &s); err != nil {
		t.Fatalf("show -o json: %v\n%s", err, show)
	}
	if s.Nightly != plan.Nightly || s.Totals.Entries != 1 || s.Totals.Pending != 1 || len(s.Entries) != 1 || s.Entries[0].Status != "pending" {
		t.Errorf("show: %+v", s)
	}
	text := producer(t, "nightly", "show", plan.Nightly, "--store", store)
	text.wantCode(t, cli.ExitOK)
	for _, want := range []string{"nightly " + plan.Nightly, "MODEL", "mlp", "pending"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("show lacks %q:\n%s", want, text)
		}
	}

	producer(t, "nightly", "report", plan.Nightly, "--store", store, "--ui-url", "http://ui.example:8080").wantCode(t, cli.ExitOK)
	if got := list(); len(got) != 1 || got[0].Totals == nil || got[0].Totals.Pending != 1 {
		t.Errorf("list after the report: %+v, want its totals", got)
	}

	producer(t, "nightly", "show", "2026-01-01-000000000000", "--store", store).
		wantError(t, "producer", cli.ExitUsage, "nightly 2026-01-01-000000000000 has no nightly/2026-01-01-000000000000/plan.json")
	producer(t, "nightly", "show", "../etc", "--store", store).wantError(t, "producer", cli.ExitUsage, `bad nightly id "../etc"`)
	producer(t, "nightly", "report", plan.Nightly, "--store", store, "--ui-url", "ftp://x").wantError(t, "producer", cli.ExitUsage, `--ui-url "ftp://x"`)
}

// A nightly given a signing key signs every run of the night, whoever
// finalized it: a worker without the key finalizes the run, and
// `nightly --wait --sign-key` signs it once it ends, so fetch
// --verify-key takes it. Without --wait the key is refused, naming the
// way that works, before anything is submitted.
func TestNightlySignKeySignsEveryRun(t *testing.T) {
	t.Parallel()
	needORT(t)
	dir := mlpBundle(t)
	url := testsvc.OwnRedis(t, testsvc.RedisOptions{}).URL
	store := "file://" + t.TempDir()
	keys := t.TempDir()
	key, pub := writeKeyPair(t, keys, "signing", "p256")
	f := fleetFile(t, mlpFleet(dir, "cpu", ""))
	args := []string{"nightly", "--fleet", f, "--redis", url, "--store", store, "--date", "2026-12-02", "--sign-key", key}

	producer(t, args...).wantError(t, "producer", cli.ExitUsage, "with nightly needs --wait", "worker run --sign-key")
	producer(t, "nightly", "--fleet", f, "--redis", url, "--store", store, "--sign-key", key, "--schedule", "0 2 * * *").wantError(t, "producer", cli.ExitUsage, "with nightly needs --wait")
	if n, _ := redisClient(t, url).ZCard(context.Background(), "tunefleet:runs").Result(); n != 0 {
		t.Fatalf("a refused nightly submitted %d run(s)", n)
	}

	startWorkerRun(t, url, store, "cpu") // no key
	o := producer(t, append(args, "--wait", "--wait-timeout", "5m")...)
	o.wantCode(t, cli.ExitOK)
	if !strings.Contains(o.stderr, "signed here (its finalize had no signing key)") {
		t.Errorf("the nightly does not say it signed the run a worker finalized:\n%s", o)
	}
	out := filepath.Join(t.TempDir(), "out")
	producer(t, "fetch", "mlp", "--platform", "cpu", "--store", store, "--out", out, "--verify-key", pub, "--seen", filepath.Join(keys, "seen.json")).wantCode(t, cli.ExitOK)
	producer(t, "verify", out, "--key", pub).wantCode(t, cli.ExitOK)
}
