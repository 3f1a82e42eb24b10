package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/web"
)

// TestModelPageMarksANewVersion: on a model's page, a run whose bundle was
// replaced is marked on each graph's chart as a new version (not a
// settings change), its row says what changed, its heavier figures count
// no regression, and its change of winner is ringed though the previous
// winner had tied with the new one (issue 30: the chart did not ring it).
func TestModelPageMarksANewVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := runstate.ConnectRedis(ctx, testsvc.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	bench := func(ms float64) *history.Bench {
		return &history.Bench{BatchSize: 1, Samples: 200, Throughput: 1000 / ms, MeanMs: ms, P50Ms: ms, P90Ms: ms * 1.02, P99Ms: ms * 1.05,
			CV: 0.01, Stable: true, EstimateMs: ms, RoundMs: []float64{ms, ms * 1.01, ms * 0.99, ms, ms}}
	}
	created := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	for i, e := range []struct {
		run, bundle, digest, cand string
		ms                        float64
		tied                      []string
	}{
		{"m-aaaaaaaaaaaa", "sha256:" + strings.Repeat("1", 64), "sha256:" + strings.Repeat("a", 64), "ort:cpu:basic", 1, []string{"ort:cpu:basic", "ort:cpu:all"}},
		{"m-bbbbbbbbbbbb", "sha256:" + strings.Repeat("2", 64), "sha256:" + strings.Repeat("b", 64), "ort:cpu:all", 3, nil},
	} {
		entry := &history.Entry{Format: history.Format, Model: "webtest.Version", Platform: "cpu-test", Target: "cpu", Run: e.run,
			Created: created.Add(time.Duration(i) * 24 * time.Hour), FinalizedAt: created.Add(time.Duration(i)*24*time.Hour + time.Minute),
			Status: "done", BundleDigest: e.bundle, StateKey: "blobs/sha256/" + strings.Repeat("0", 64), StateSHA256: strings.Repeat("0", 64),
			Device: "cpu", Settings: &history.Settings{Strategy: "max-throughput", Candidates: []string{"ort:cpu:basic", "ort:cpu:all"}},
			Graphs: []history.Graph{{Name: "0", Status: history.GraphDone, Candidate: e.cand, Bench: bench(e.ms), Tied: e.tied, Digest: e.digest, Shapes: "input:1x16..4x16"}}}
		if _, err := history.Append(ctx, store, entry); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := web.New(web.Config{Redis: rdb, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	code, body := get(t, hs.URL+"/models/webtest.Version", nil)
	if code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", code, body)
	}
	for want, n := range map[string]int{
		`class="xmark version"`:   1, // the second run, on graph 0's chart
		`class="xmark settings"`:  0,
		`class="point mark"`:      1, // the winner change, ringed
		`history-row new-version`: 1,
		`class="num failed"`:      0, // no regression counted
	} {
		if got := strings.Count(body, want); got != n {
			t.Errorf("%d of %s on the model page, want %d", got, want, n)
		}
	}
	for _, want := range []string{"new version: bundle sha256:111111111111 → sha256:222222222222", "files sha256:aaaaaaaaaaaa → sha256:bbbbbbbbbbbb", "winner changed: ort:cpu:basic → ort:cpu:all"} {
		if !strings.Contains(body, want) {
			t.Errorf("the model page does not say %q", want)
		}
	}
}
