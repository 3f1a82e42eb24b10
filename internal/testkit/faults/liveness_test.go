package faults_test

import (
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/stack"
	"github.com/tunefleet/tunefleet/runstate"
)

// probe GETs a worker's health path and returns its status code (0 when
// it did not answer) and body.
func probe(url string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Redis stopped mid-build for longer than the worker's liveness budget:
// /healthz (what the kubelet's liveness probe reads) answers 200 all along,
// /readyz answers 503 while Redis is down, and the build in progress
// finishes on its first attempt, its result landing once Redis is back
// (issue 34: /healthz pinged Redis, and six failed probes killed every
// build over a Redis restart). The budget is shrunk to 1 s with
// --liveness-budget so that a 4 s outage outlasts it fourfold.
func TestRedisOutageOutlastsLiveness(t *testing.T) {
	const outage = 4 * time.Second
	sc := begin(t, 11, "redis-server stopped (SIGTERM, appendonly) once the worker is tuning, for 4 s, four times the worker's --liveness-budget 1s; started again")
	s := stack.New(t, stack.Options{PersistRedis: true})
	const model = "faults.RedisOutage"
	dir := stack.ModelBundle(t, model, onnxtest.MLP(64, 32, 8))
	addr := freeAddr(t)
	w := s.StartWorker(stack.WorkerOptions{Args: []string{"--health", addr, "--liveness-budget", "1s"}})
	health, ready := fmt.Sprintf("http://%s/healthz", addr), fmt.Sprintf("http://%s/readyz", addr)
	stack.Poll(t, time.Minute, "worker ready", func() (bool, string) {
		code, body := probe(ready)
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
	run, _ := s.Submit(dir, slowCandidates...)
	stack.Poll(t, 3*time.Minute, "the worker tuning graph 0", func() (bool, string) {
		return strings.Contains(w.Log(), "graph 0: tuning"), "no tuning line in the worker's log yet"
	})
	s.Redis.Stop()
	down := time.Now()
	// /readyz waits on a Redis dial, so it is probed beside /healthz,
	// not between two of its probes.
	var unready atomic.Int32
	readyDone := make(chan struct{})
	go func() {
		defer close(readyDone)
		for time.Since(down) < outage {
			if code, body := probe(ready); code == http.StatusServiceUnavailable && strings.Contains(body, "redis") {
				unready.Add(1)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	probes := 0
	for time.Since(down) < outage {
		code, body := probe(health)
		probes++
		if code != http.StatusOK {
			t.Errorf("/healthz answered %d %q %s into the Redis outage, want 200: a liveness probe would kill the build", code, body, time.Since(down).Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond)
	}
	<-readyDone
	if unready.Load() == 0 {
		t.Errorf("/readyz never answered 503 naming Redis while Redis was down")
	}
	sc.assert(fmt.Sprintf("/healthz 200 in %d probes over the outage, /readyz 503 in %d", probes, unready.Load()))
	s.Redis.Start()
	s.WaitFinal(run, leaseWait)
	st := checkRun(t, sc, s, run, want{status: runstate.RunDone, model: model})
	if g := st.Graphs["0"]; g.Attempts != 1 {
		t.Errorf("graph 0 took %d attempts, want the build in progress to finish on its first: %+v", g.Attempts, g)
	}
	sc.assert("graph done on attempt 1")
	if w.Exited() {
		t.Errorf("the worker exited over the outage")
	}
}

// A graph whose files do not fit in the worker's --work-dir is refused
// before a byte is downloaded, with a message that says how much it needs,
// how much is free and what to change (issue 34: a big bundle filled the
// pod's scratch volume and got the pod evicted, with its task).
func TestWorkDirTooSmall(t *testing.T) {
	sc := begin(t, 12, "the worker's --work-dir a 1 MiB tmpfs; a graph of 4.5 MiB of weights")
	disk := smallDisk(t, "1m")
	s := stack.New(t, stack.Options{})
	const model = "faults.WorkDirSmall"
	dir := stack.ModelBundle(t, model, onnxtest.MLP(64, 16384, 8))
	w := s.StartWorker(stack.WorkerOptions{Args: []string{"--work-dir", disk}})
	run, _ := s.Submit(dir, "--candidates", "ort:cpu:basic")
	s.WaitAttempt(run, "0", 1, time.Minute)
	var last string
	stack.Poll(t, time.Minute, "the refusal in status", func() (bool, string) {
		st, _ := s.Status(run)
		last = st.Graphs["0"].LastError
		return strings.Contains(last, "not downloaded"), last
	})
	for _, want := range []string{"MiB free", disk, "--work-dir"} {
		if !strings.Contains(last, want) {
			t.Errorf("last_error %q does not say %q", last, want)
		}
	}
	sc.assert("status last_error: needs, free, --work-dir")
	wantLine(t, sc, "the worker's log", w.Log(), "not downloaded")
	// Nothing was downloaded: no file on the volume holds a byte.
	var bytes int64
	filepath.WalkDir(disk, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				bytes += fi.Size()
			}
		}
		return nil
	})
	if bytes > 0 {
		t.Errorf("%d bytes were written to the work directory before the refusal", bytes)
	}
	sc.assert("nothing written")
}
