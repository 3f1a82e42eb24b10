package e2e_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/runstate"
)

// scrape reads a worker's /metrics into its tunefleet series, keyed as
// the text format writes them: name{label="value",...}.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "tunefleet_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// waitHealthy waits for a worker's /healthz to answer 200.
func waitHealthy(t *testing.T, base string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/healthz never answered 200: %v", base, err)
		}
	}
}

// A worker's /metrics, scraped before and after a real run (redis-server,
// versitygw, ONNX Runtime), shows the tasks started and finished and the
// phase histograms move by what the run did; its --log-format json stderr
// has one JSON object a line, with a start and an end record per graph
// (issue 12).
func TestMetricsMoveDuringARun(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	dir := modelBundle(t, "e2e.Metrics", onnxtest.MLP(64, 32, 8), onnxtest.ConvNet())
	base := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	w := startWorker(t, s, "--health", strings.TrimPrefix(base, "http://"), "--log-format", "json", "--concurrency", "2")
	waitHealthy(t, base)
	q := s.queue
	started := fmt.Sprintf(`tunefleet_tasks_started_total{queue="%s"}`, q)
	succeeded := fmt.Sprintf(`tunefleet_tasks_finished_total{failure_class="",outcome="succeeded",queue="%s"}`, q)
	phase := func(p string) string { return fmt.Sprintf(`tunefleet_phase_duration_seconds_count{phase="%s"}`, p) }
	before := scrape(t, base+"/metrics")
	for _, k := range []string{started, succeeded, phase("download"), phase("benchmark"), `tunefleet_slots_total{kind="cpu"}`} {
		if _, ok := before[k]; !ok {
			t.Fatalf("a fresh worker's /metrics has no %s", k)
		}
	}

	code, so, errs := submit(t, s, dir, "--candidates", "ort:cpu:basic,ort:cpu:extended", "--strategy", "max-throughput")
	if code != 0 {
		t.Fatalf("submit exit %d: %s", code, errs)
	}
	if st := waitFinal(t, s.runs(t), so.Submissions[0].Run, 3*time.Minute); st.Status != runstate.RunDone {
		t.Fatalf("run %+v", st)
	}
	// The run is final a moment before its last task returns and is
	// counted: poll for it.
	var after map[string]float64
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		after = scrape(t, base+"/metrics")
		if after[succeeded]-before[succeeded] >= 2 || time.Now().After(deadline) {
			break
		}
	}
	moved := func(k string) float64 { return after[k] - before[k] }
	if wait := fmt.Sprintf(`tunefleet_queue_wait_seconds_count{queue="%s"}`, q); moved(wait) != 2 {
		t.Errorf("%s moved by %v, want 2 (each graph's first start)", wait, moved(wait))
	}
	if moved(started) != 2 || moved(succeeded) != 2 {
		t.Errorf("tasks started moved by %v, succeeded by %v; want 2 each (two graphs)", moved(started), moved(succeeded))
	}
	for p, want := range map[string]float64{"download": 2, "build": 4, "check": 4, "benchmark": 4, "upload": 2} {
		if got := moved(phase(p)); got != want {
			t.Errorf("phase %s histogram count moved by %v, want %v (2 graphs × 2 candidates build, check and benchmark)", p, got, want)
		}
	}
	for _, k := range []string{`tunefleet_bytes_transferred_total{direction="down"}`, `tunefleet_bytes_transferred_total{direction="up"}`,
		fmt.Sprintf(`tunefleet_task_duration_seconds_sum{queue="%s"}`, q), `tunefleet_result_index_lookups_total{result="miss"}`} {
		if moved(k) <= 0 {
			t.Errorf("%s did not move: %v → %v", k, before[k], after[k])
		}
	}
	if after[`tunefleet_slots_busy{kind="cpu"}`] != 0 || after[`tunefleet_slots_total{kind="cpu"}`] != 2 {
		t.Errorf("slots after the run: busy %v of %v, want 0 of 2", after[`tunefleet_slots_busy{kind="cpu"}`], after[`tunefleet_slots_total{kind="cpu"}`])
	}
	// The log is read once the worker has exited and written its last
	// line (its shutdown, a JSON record too).
	w.cmd.Process.Signal(syscall.SIGTERM)
	if err := w.cmd.Wait(); err != nil {
		t.Fatalf("worker exit after SIGTERM: %v", err)
	}
	wantJSONTaskLines(t, w.log.String(), 2)
}

// wantJSONTaskLines checks that every line of a --log-format json worker's
// stderr is one JSON object, with an info start and end record per graph.
func wantJSONTaskLines(t *testing.T, log string, graphs int) {
	t.Helper()
	ends := 0
	starts := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Errorf("worker stderr line is not JSON: %q", line)
			continue
		}
		switch r["msg"] {
		case "task started":
			starts[fmt.Sprint(r["graph"])] = true
		case "task finished":
			if r["level"] == "INFO" && r["outcome"] == "succeeded" && r["winner"] != nil && r["duration"] != nil {
				ends++
			}
		}
	}
	if len(starts) != graphs || ends != graphs {
		t.Errorf("%d graphs started and %d ended in the log, want %d each:\n%s", len(starts), ends, graphs, log)
	}
}
