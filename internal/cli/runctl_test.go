package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
)

// A run Redis lost (a restart without persistence) is not "no such run"
// while the store has it: status rebuilds it, reconcile re-enqueues its
// graphs, cancel ends it, and every step says what it did.
func TestStatusReconcileAndCancelAfterRedisLostTheRun(t *testing.T) {
	url := testsvc.Redis(t)
	store := "file://" + t.TempDir()
	dir := mlpBundle(t)
	run := submitRun(t, dir, "--redis", url, "--store", store, "--target", "nobody", "--allow-unserved",
		"--strategy", "first-wins", "--candidates", "ort:cpu:basic")

	rdb := redisClient(t, url)
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	st := producer(t, "status", run, "--redis", url, "--store", store, "-o", "json")
	st.wantCode(t, cli.ExitOK)
	if !strings.Contains(st.stderr, "rebuilt from") {
		t.Fatalf("status does not say the run was rebuilt:\n%s", st)
	}
	var got runstate.RunStatus
	if err := json.Unmarshal([]byte(st.stdout), &got); err != nil || got.Status != runstate.RunRunning || !got.Restored || got.Graphs["0"].Status != runstate.GraphPending {
		t.Fatalf("status after the loss: %+v %v", got, err)
	}

	rec := producer(t, "reconcile", run, "--redis", url, "--store", store)
	rec.wantCode(t, cli.ExitOK)
	if !strings.Contains(rec.stdout, "graph 0: re-enqueued") {
		t.Fatalf("reconcile did not re-enqueue the lost task:\n%s", rec)
	}

	c := producer(t, "cancel", run, "--redis", url)
	c.wantCode(t, cli.ExitOK)
	if !strings.Contains(c.stdout, "cancelled, 1 pending graph(s) dropped") {
		t.Fatalf("cancel output:\n%s", c)
	}
	producer(t, "cancel", "no-such-run", "--redis", url).wantCode(t, cli.ExitUsage)
	producer(t, "status", "no-such-run", "--redis", url, "--store", store).wantCode(t, cli.ExitUsage)
	producer(t, "status", run, "--redis", url, "--timeout", "1s").wantCode(t, cli.ExitUsage) // --timeout needs --watch
}

// A cancelled run ends even when no worker serves its queue: cancel
// finalizes it itself (on main it stayed running forever, its finalize
// waiting on a queue nobody served). Real redis-server, no worker at all.
func TestCancelWithNoWorkerEndsTheRun(t *testing.T) {
	url := testsvc.Redis(t)
	root := t.TempDir()
	store := "file://" + root
	run := submitRun(t, mlpBundle(t), "--redis", url, "--store", store, "--target", "nobody", "--allow-unserved",
		"--strategy", "first-wins", "--candidates", "ort:cpu:basic")
	c := producer(t, "cancel", run, "--redis", url, "--store", store)
	c.wantCode(t, cli.ExitOK)
	if !strings.Contains(c.stdout, "finalized as cancelled") {
		t.Errorf("cancel output:\n%s", c)
	}
	st := producer(t, "status", run, "--redis", url, "--store", store, "-o", "json")
	st.wantCode(t, cli.ExitOK)
	var got runstate.RunStatus
	if err := json.Unmarshal([]byte(st.stdout), &got); err != nil || got.Status != runstate.RunCancelled || got.Finalizations != 1 || got.Cancelled != 1 {
		t.Fatalf("status after cancel: %+v %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(root, "runs", run, "state.json")); err != nil {
		t.Errorf("no state.json for the cancelled run: %v", err)
	}
	again := producer(t, "cancel", run, "--redis", url, "--store", store)
	again.wantCode(t, cli.ExitOK)
	if !strings.Contains(again.stdout, "had already ended") {
		t.Errorf("second cancel:\n%s", again)
	}
	st = producer(t, "status", run, "--redis", url, "--store", store, "-o", "json")
	if err := json.Unmarshal([]byte(st.stdout), &got); err != nil || got.Finalizations != 1 {
		t.Errorf("finalized %d times, want once (%v)", got.Finalizations, err)
	}
}

// A --watch or --wait that times out says where the run really is: on
// main a timeout that cut a poll short printed "still unknown (0/0
// graph(s) finished)" for a running 0/1 run. --timeout 1ns expires before
// the first poll can answer, the worst case. No worker serves the run.
func TestWaitTimeoutSaysTheRunsStatus(t *testing.T) {
	url := testsvc.Redis(t)
	store := "file://" + t.TempDir()
	dir := mlpBundle(t)
	common := []string{"--redis", url, "--store", store, "--target", "nobody", "--allow-unserved",
		"--strategy", "first-wins", "--candidates", "ort:cpu:basic"}
	run := submitRun(t, append([]string{dir}, common...)...)
	want := "still running (0/1 graph(s) finished); it goes on"
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"status --watch", []string{"status", run, "--redis", url, "--store", store, "--watch", "--timeout", "1ns"}},
		{"status --watch -o json", []string{"status", run, "--redis", url, "--store", store, "--watch", "--timeout", "1ns", "-o", "json"}},
		{"submit --wait", append([]string{"submit", dir, "--force", "--wait", "--wait-timeout", "1ns"}, common...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := producer(t, tc.args...)
			o.wantCode(t, cli.ExitFailed)
			if !strings.Contains(o.stderr, "timed out after 1ns, "+want) || strings.Contains(o.stderr, "unknown") {
				t.Errorf("the timeout does not say %q:\n%s", want, o)
			}
		})
	}
}

// TestStatusStateOnlyWhereTheStoreHasIt: `status` of a final run prints
// its state: location only when --store has it; a --store that is not
// the run's (an empty one) or not there gets no state: line and exit 2
// naming --store. (On main it printed a confident state: URL in the
// wrong store with exit 0.) Real redis-server, no worker: cancel
// finalizes the run.
func TestStatusStateOnlyWhereTheStoreHasIt(t *testing.T) {
	url := testsvc.Redis(t)
	root := t.TempDir()
	store := "file://" + root
	run := submitRun(t, mlpBundle(t), "--redis", url, "--store", store, "--target", "nobody", "--allow-unserved",
		"--strategy", "first-wins", "--candidates", "ort:cpu:basic")
	producer(t, "cancel", run, "--redis", url, "--store", store).wantCode(t, cli.ExitOK)

	ok := producer(t, "status", run, "--redis", url, "--store", store)
	ok.wantCode(t, cli.ExitOK)
	if want := "state: " + filepath.Join(root, "runs", run, "state.json"); !strings.Contains(ok.stdout, want) {
		t.Errorf("status with the run's store lacks %q:\n%s", want, ok)
	}
	wrong := t.TempDir()
	for _, tc := range []struct{ store, want string }{
		{"file://" + wrong, "is not in --store file://" + wrong},
		{"file://" + filepath.Join(wrong, "nosuch"), "no store at"},
	} {
		o := producer(t, "status", run, "--redis", url, "--store", tc.store)
		o.wantCode(t, cli.ExitUsage)
		if strings.Contains(o.stdout, "state: ") || !strings.Contains(o.stdout, "cancelled") || !strings.Contains(o.stderr, tc.want) {
			t.Errorf("status with --store %s: want the run's table, no state: line, and %q on stderr:\n%s", tc.store, tc.want, o)
		}
	}
}
