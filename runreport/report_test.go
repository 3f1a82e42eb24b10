package runreport_test

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/runreport"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

func bench(bs int, tput float64) backend.Stats {
	return backend.Stats{BatchSize: bs, Samples: 100, MeanMs: float64(bs) * 1000 / tput, P50Ms: 1, P90Ms: 2, P99Ms: 3, Throughput: tput, Stable: bs != 4, StopReason: "stable"}
}

func sample() *runreport.Report {
	res := &tuner.Result{Format: tuner.ResultFormat, Graph: "0", Strategy: "max-throughput", BatchSizes: []int{1, 2, 4},
		Results: []backend.CandidateResult{
			{Candidate: "ort:cpu:basic", Status: backend.StatusPassed, Benchmarks: []backend.Stats{bench(1, 100), bench(2, 180), bench(4, 300)},
				Artifacts: []backend.FileRef{{Role: "log", Path: "0/build.log", SHA256: strings.Repeat("a", 64), Size: 10}}},
			{Candidate: "ort:cpu:all", Status: backend.StatusPassed, Benchmarks: []backend.Stats{bench(1, 120), bench(2, 200), bench(4, 350)}},
			{Candidate: "ort:cpu:bad", Status: backend.StatusFailed, Failure: &backend.FailureInfo{Class: backend.FailWrongAnswer, Message: "output 0 differs <by> 3"}},
		}}
	res.Winner = &tuner.Winner{Selection: strategy.Selection{Index: 1, Candidate: "ort:cpu:all", BatchSize: 4, Reason: "highest throughput 350 samples/s at batch 4"},
		Engine: &backend.FileRef{Role: "engine", Path: "1/model.optimized.onnx", SHA256: strings.Repeat("b", 64), Size: 2048}}
	return &runreport.Report{Run: "m-1", Model: "m", Target: "cpu", Status: "failed", Reasons: []string{"graph 1: result unreadable"},
		Graphs: []runreport.Graph{
			{Name: "0", Status: "done", Result: res},
			{Name: "1", Status: "done", Unreadable: "malformed JSON: unexpected end of JSON input"},
			{Name: "2", Status: "pending", Attempts: 2, LastError: "timeout: benchmark took too long"},
		}}
}

func TestPageIsSelfContainedAndCountsWhatItDraws(t *testing.T) {
	var b bytes.Buffer
	if err := runreport.Page(&b, sample()); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"<script", "<link", "src=", "url(", "@import", "href=\"http"} {
		if strings.Contains(page, bad) {
			t.Errorf("report.html has %q", bad)
		}
	}
	for _, want := range []string{
		`data-kind="lines" data-series="2" data-points="6"`, // ort:cpu:bad was never measured
		`data-kind="hbars" data-series="1" data-points="1"`, // one graph has a winner
		"result.json is unreadable: malformed JSON", "wrong_answer", "output 0 differs &lt;by&gt; 3",
		"highest throughput 350 samples/s at batch 4", "last error: timeout", "unstable",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	// Without a store to link to, logs and engines are named, not linked.
	if strings.Contains(page, `class="log" href`) || strings.Contains(page, `class="engine" href`) {
		t.Error("report.html links to blobs it cannot reach")
	}
}

func TestBodyLinksBlobsWhenGivenALinker(t *testing.T) {
	html, err := runreport.Body(sample(), runreport.Links{
		Blob:  func(sha, name string) string { return "/blobs/sha256/" + sha + "?name=" + name },
		Model: func(m string) string { return "/models/" + m },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{`class="log" href="/blobs/sha256/a{64}\?name=build.log"`, `class="engine" href="/blobs/sha256/b{64}\?name=model.optimized.onnx"`, `href="/models/m"`} {
		if !regexp.MustCompile(re).MatchString(string(html)) {
			t.Errorf("body lacks a link matching %s", re)
		}
	}
}

func TestDecodeResult(t *testing.T) {
	for _, tc := range []struct {
		name, data, err string
	}{
		{"truncated", `{"format": "tunefleet.result/v1", "results": [`, "malformed JSON"},
		{"other format", `{"format": "tunefleet.result/v9"}`, `format "tunefleet.result/v9"`},
		{"winner out of range", `{"format": "tunefleet.result/v1", "results": [], "winner": {"index": 3, "candidate": "x", "reason": ""}}`, "outside"},
		{"unnamed candidate", `{"format": "tunefleet.result/v1", "results": [{"status": "passed"}]}`, "names no candidate"},
		{"fine", `{"format": "tunefleet.result/v1", "results": [{"candidate": "ort:cpu:all", "status": "passed"}]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runreport.DecodeResult([]byte(tc.data))
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one with %q", err, tc.err)
			}
		})
	}
}

// Charts that do not lie (issue 19): a point whose calls had outliers is
// flagged and says how many were left out and the slowest; every point
// shows the interval of the figure the pick used next to its percentiles;
// an identical engine says it was measured once.
func TestChartMarksOutliersAndIntervals(t *testing.T) {
	r := sample()
	res := r.Graphs[0].Result
	st := &res.Results[1].Benchmarks[2]
	st.Outliers, st.OutlierMaxMs, st.FenceLoMs, st.FenceHiMs = 3, 209, 10, 13
	st.RoundMs = []float64{11.2, 11.5, 11.4, 11.6, 11.3}
	res.Results[0].SameEngineAs = "ort:cpu:all"
	var b bytes.Buffer
	if err := runreport.Page(&b, r); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`class="flag"`, "3 outlier call(s) left out (slowest 209 ms", // the 209 ms stall is marked, not drawn as a dip
		`class="interval"`, "over 5 rounds", // the pick's figure with its interval
		"identical engine to ort:cpu:all: measured once",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if n := strings.Count(page, `class="flag"`); n != 1 {
		t.Errorf("%d points flagged, want the one with outliers", n)
	}
}

// Page writes Body, as the run page shows it without links, between the
// page's head and footer: rendered straight into the writer, the same
// bytes as the body rendered on its own.
func TestPageHoldsTheBodyAsRendered(t *testing.T) {
	var b strings.Builder
	if err := runreport.Page(&b, sample()); err != nil {
		t.Fatal(err)
	}
	body, err := runreport.Body(sample(), runreport.Links{})
	if err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if !strings.Contains(page, "<body>\n"+string(body)+"\n<footer class=\"meta\">") || !strings.HasSuffix(page, "</body></html>\n") {
		t.Fatalf("the page does not hold the body between its head and footer:\n%s", page)
	}
}

// A page written a graph at a time (Stream) is byte for byte the page of
// the whole report (Page), with and without a summary chart and with
// graphs of every kind (a winner, an unreadable result, one pending, one
// failed).
func TestStreamWritesWhatPageWrites(t *testing.T) {
	failed := sample()
	failed.Graphs = []runreport.Graph{
		{Name: "x", Status: "failed", Class: "infrastructure", Message: "worker lost\nsecond line"},
		{Name: "y", Status: "pending"},
	}
	many := sample()
	for i := range 50 {
		g := many.Graphs[i%3]
		g.Name = fmt.Sprint("g", i)
		many.Graphs = append(many.Graphs, g)
	}
	for _, tc := range []struct {
		name string
		r    *runreport.Report
	}{
		{"sample", sample()},
		{"no winner, no chart", failed},
		{"53 graphs", many},
		{"no graph", &runreport.Report{Run: "m-0", Model: "m", Target: "cpu", Status: "failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want bytes.Buffer
			if err := runreport.Page(&want, tc.r); err != nil {
				t.Fatal(err)
			}
			var rows, sections, got bytes.Buffer
			s := runreport.NewStream(&rows, &sections)
			for _, g := range tc.r.Graphs {
				if err := s.Add(g); err != nil {
					t.Fatal(err)
				}
			}
			head := *tc.r
			head.Graphs = nil
			if err := s.Page(&got, &head, &rows, &sections); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("streamed page differs from Page's (%d vs %d bytes) from byte %d", got.Len(), want.Len(), firstDiff(got.String(), want.String()))
			}
		})
	}
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
