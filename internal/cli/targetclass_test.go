package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
)

// TestSubmitRefusesATypoedClass: a class neither declared nor ever served
// is refused (exit 2) before anything is uploaded, with the known classes
// and the closest one named.
func TestSubmitRefusesATypoedClass(t *testing.T) {
	t.Setenv("TUNEFLEET_CLASSES", "")
	url := testsvc.OwnRedis(t, testsvc.RedisOptions{}).URL
	rdb := redisClient(t, url)
	ctx := context.Background()
	if err := runstate.RegisterPlatforms(ctx, rdb, []string{"cpu", "gpu.h100"}, []string{"x86-test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	storeDir := t.TempDir()
	o := producer(t, "submit", mlpBundle(t), "--redis", url, "--store", "file://"+storeDir, "--target", "gpu.h10", "--candidates", "ort:cpu:basic")
	o.wantError(t, "producer", cli.ExitUsage, `target class "gpu.h10"`, "did you mean gpu.h100?", "known classes: cpu, gpu.h100", "--allow-unserved")
	if n, _ := rdb.ZCard(ctx, "tunefleet:runs").Result(); n != 0 {
		t.Errorf("%d run(s) recorded after a refused submit", n)
	}
	if entries, _ := os.ReadDir(storeDir); len(entries) != 0 {
		t.Errorf("the store has %v after a refused submit", entries)
	}
}

// TestCPUIsDeclaredButNotItsTypos: on a fresh fleet (no worker ever
// seen, nothing declared) the default target cpu is accepted and said to
// wait, while a typo of it is refused with cpu suggested: cpu being
// implicit hides no typo (docs/cli-grammar.md, "Why cpu is always
// declared").
func TestCPUIsDeclaredButNotItsTypos(t *testing.T) {
	t.Setenv("TUNEFLEET_CLASSES", "")
	url := testsvc.OwnRedis(t, testsvc.RedisOptions{}).URL
	dir := mlpBundle(t)
	args := []string{"submit", dir, "--redis", url, "--store", "file://" + t.TempDir(), "--candidates", "ort:cpu:basic"}
	producer(t, append(args, "--target", "cpus")...).wantError(t, "producer", cli.ExitUsage, `target class "cpus"`, "did you mean cpu?", "(known classes: cpu;")
	ok := producer(t, args...) // the default --target: cpu
	ok.wantCode(t, cli.ExitOK)
	if want := "waiting for a worker of class cpu (none live; never seen)"; !strings.Contains(ok.stderr, want) {
		t.Errorf("submit to cpu with no worker did not say %q:\n%s", want, ok)
	}
}

// TestDeclaredClassWithNoWorkerWaits: a class declared ahead of any worker
// (TUNEFLEET_CLASSES, or --allow-unserved) is accepted with no worker at
// all, its task queued on its class's queue, and status says what the run
// waits for.
func TestDeclaredClassWithNoWorkerWaits(t *testing.T) {
	url := testsvc.OwnRedis(t, testsvc.RedisOptions{}).URL
	rdb := redisClient(t, url)
	ctx := context.Background()
	store := "file://" + t.TempDir()
	dir := mlpBundle(t)
	runOf := map[string]string{}
	for _, tc := range []struct {
		name, env, class string
		args             []string
	}{
		{"TUNEFLEET_CLASSES", "cpu, gpu.l4", "gpu.l4", nil},
		{"--allow-unserved", "", "gpu.a10", []string{"--allow-unserved"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TUNEFLEET_CLASSES", tc.env)
			sub := producer(t, append([]string{"submit", dir, "--redis", url, "--store", store, "--target", tc.class, "--candidates", "ort:cpu:basic", "-o", "json"}, tc.args...)...)
			sub.wantCode(t, cli.ExitOK)
			want := "waiting for a worker of class " + tc.class + " (none live; never seen)"
			if sub.stderr != "" {
				t.Errorf("-o json, yet stderr is %q", sub.stderr)
			}
			var out struct {
				Submissions []struct{ Run string }
			}
			if err := json.Unmarshal([]byte(sub.stdout), &out); err != nil || len(out.Submissions) != 1 {
				t.Fatalf("submit -o json: %v\n%s", err, sub)
			}
			subs := out.Submissions
			runOf[tc.class] = subs[0].Run
			if n, err := rdb.LLen(ctx, "asynq:{"+tc.class+"}:pending").Result(); err != nil || n != 1 {
				t.Errorf("%d task(s) pending on %s (%v), want 1", n, tc.class, err)
			}
			// Text output tells the person submitting at once.
			text := producer(t, append([]string{"submit", dir, "--redis", url, "--store", store, "--target", tc.class, "--candidates", "ort:cpu:basic"}, tc.args...)...)
			text.wantCode(t, cli.ExitOK)
			if !strings.Contains(text.stderr, want) {
				t.Errorf("submit did not say %q: %s", want, text)
			}
			st := producer(t, "status", subs[0].Run, "--redis", url, "--store", store)
			st.wantCode(t, cli.ExitOK)
			if !strings.Contains(st.stdout, want) {
				t.Errorf("status did not say %q: %s", want, st)
			}
			// -o json carries it as a field a script can test.
			js := producer(t, "status", subs[0].Run, "--redis", url, "--store", store, "-o", "json")
			js.wantCode(t, cli.ExitOK)
			var got struct {
				Status  string
				Waiting *struct {
					Class, Message string
					LastSeen       *time.Time `json:"last_seen"`
					ServedBefore   bool       `json:"served_before"`
				} `json:"waiting_for_class"`
			}
			if err := json.Unmarshal([]byte(js.stdout), &got); err != nil || got.Status != "running" || got.Waiting == nil ||
				got.Waiting.Class != tc.class || got.Waiting.Message != want || got.Waiting.LastSeen != nil || got.Waiting.ServedBefore {
				t.Errorf("status -o json: want waiting_for_class %q with no last_seen (%v):\n%s", want, err, js)
			}
			// The recent runs' table says it under the table, once per class.
			list := producer(t, "status", "--redis", url)
			list.wantCode(t, cli.ExitOK)
			if strings.Count(list.stdout, want) != 1 {
				t.Errorf("status (the recent runs) does not say %q once:\n%s", want, list)
			}
		})
	}
	// Once a worker of the class was seen and went away, status says when.
	seen := time.Date(2026, 12, 1, 3, 4, 5, 0, time.UTC)
	if err := runstate.RegisterPlatforms(ctx, rdb, []string{"gpu.l4"}, []string{"l4-test"}, seen); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TUNEFLEET_CLASSES", "")
	if runOf["gpu.l4"] == "" {
		t.Fatal("no run on gpu.l4")
	}
	st := producer(t, "status", runOf["gpu.l4"], "--redis", url, "--store", store)
	if want := "waiting for a worker of class gpu.l4 (none live; last seen 2026-12-01T03:04:05Z)"; !strings.Contains(st.stdout, want) {
		t.Errorf("status did not say %q: %s", want, st)
	}
	js := producer(t, "status", runOf["gpu.l4"], "--redis", url, "--store", store, "-o", "json")
	if want := `"last_seen": "2026-12-01T03:04:05Z",
    "served_before": true,`; !strings.Contains(js.stdout, want) {
		t.Errorf("status -o json lacks %q:\n%s", want, js)
	}
	// A class with a live worker waits for nothing.
	if err := runstate.RegisterPlatforms(ctx, rdb, []string{"gpu.l4"}, []string{"l4-test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	js = producer(t, "status", runOf["gpu.l4"], "--redis", url, "--store", store, "-o", "json")
	if strings.Contains(js.stdout, "waiting_for_class") {
		t.Errorf("status -o json with a live worker of the class:\n%s", js)
	}
}

// TestNightlyWaitSaysWhatItWaitsFor: nightly --wait on a declared class
// with no worker says, when --wait-timeout passes, where each run is and
// that it waits for a worker of its class; a second nightly --wait of the
// same night (nothing submitted, so no submit line) says it as it starts.
func TestNightlyWaitSaysWhatItWaitsFor(t *testing.T) {
	t.Setenv("TUNEFLEET_CLASSES", "")
	url := testsvc.OwnRedis(t, testsvc.RedisOptions{}).URL
	f := fleetFile(t, mlpFleet(mlpBundle(t), "gpu.h100", "classes: [gpu.h100]\n"))
	args := []string{"nightly", "--fleet", f, "--redis", url, "--store", "file://" + t.TempDir(), "--date", "2026-12-01",
		"--wait", "--wait-timeout", "1s"}
	first := producer(t, append(args, "-o", "json")...)
	first.wantCode(t, cli.ExitFailed)
	var plan struct {
		Nightly string                 `json:"nightly"`
		Entries []struct{ Run string } `json:"entries"`
	}
	if err := json.Unmarshal([]byte(first.stdout), &plan); err != nil || len(plan.Entries) != 1 {
		t.Fatalf("plan %+v (%v)\n%s", plan, err, first)
	}
	waiting := "waiting for a worker of class gpu.h100 (none live; never seen)"
	if want := fmt.Sprintf("nightly %s: run %s (model mlp, target gpu.h100): still running (0/1 graph(s) finished); %s\n", plan.Nightly, plan.Entries[0].Run, waiting); !strings.Contains(first.stderr, want) {
		t.Errorf("nightly --wait did not say %q:\n%s", want, first)
	}
	if want := "--wait-timeout 1s passed before every run ended"; !strings.Contains(first.stderr, want) {
		t.Errorf("nightly --wait did not say %q:\n%s", want, first)
	}
	again := producer(t, args...)
	again.wantCode(t, cli.ExitFailed)
	// Said as it starts (after the night's estimate), before --wait's
	// timeout lists the runs.
	want := "nightly " + plan.Nightly + ": " + waiting + "\n"
	if i, j := strings.Index(again.stderr, want), strings.Index(again.stderr, "still running"); i < 0 || j >= 0 && j < i {
		t.Errorf("a second nightly --wait does not say %q before it waits:\n%s", want, again)
	}
}

// TestNightlyDeclaredClassScalesFromZero is what KEDA's scale-from-zero
// needs: the nightly submits to a class the fleet file declares though no
// worker of it was ever seen, its tasks wait on asynq's queue of that
// class, and the first worker of the class to start tunes them to the end.
// (The worker is this machine's CPU serving the queue gpu.h100, as a GPU
// node's would.)
func TestNightlyDeclaredClassScalesFromZero(t *testing.T) {
	t.Setenv("TUNEFLEET_CLASSES", "")
	url := testsvc.OwnRedis(t, testsvc.RedisOptions{}).URL
	rdb := redisClient(t, url)
	ctx := context.Background()
	dir := mlpBundle(t)
	f := fleetFile(t, mlpFleet(dir, "gpu.h100", "classes: [gpu.h100]\n"))
	store := "file://" + t.TempDir()
	night := producer(t, "nightly", "--fleet", f, "--redis", url, "--store", store, "--date", "2026-12-01", "-o", "json")
	night.wantCode(t, cli.ExitOK)
	// -o json: stderr holds only errors off a terminal (a script merges
	// it); the human form says what the class waits for.
	if night.stderr != "" {
		t.Errorf("nightly -o json wrote to stderr off a terminal: %s", night)
	}
	var plan struct {
		Entries []struct{ Run, Outcome string } `json:"entries"`
	}
	if err := json.Unmarshal([]byte(night.stdout), &plan); err != nil || len(plan.Entries) != 1 || plan.Entries[0].Outcome != "submitted" {
		t.Fatalf("plan %+v (%v)\n%s", plan, err, night)
	}
	text := producer(t, "status", plan.Entries[0].Run, "--redis", url, "--store", store)
	if want := "waiting for a worker of class gpu.h100 (none live; never seen)"; !strings.Contains(text.stdout, want) {
		t.Errorf("status did not say %q: %s", want, text)
	}
	if n, err := rdb.LLen(ctx, "asynq:{gpu.h100}:pending").Result(); err != nil || n != 1 {
		t.Fatalf("%d task(s) in asynq:{gpu.h100}:pending (%v), want 1", n, err)
	}

	wk := startWorkerRun(t, url, store, "gpu.h100")
	w := producer(t, "status", plan.Entries[0].Run, "--redis", url, "--store", store, "--watch", "--timeout", "2m", "-o", "json")
	w.wantCode(t, cli.ExitOK)
	var st struct{ Status string }
	if err := json.Unmarshal([]byte(w.stdout), &st); err != nil || st.Status != "done" {
		t.Fatalf("run ended %q (%v)\n%s\nworker:\n%s", st.Status, err, w, wk.log.String())
	}
}
