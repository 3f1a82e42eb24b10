package metrics_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/metrics"
)

// dashboardFile is the Grafana dashboard built on these series.
const dashboardFile = "../deploy/grafana/tunefleet.json"

// webSeries are exported by `producer serve` (package web), not by a
// worker: queue depth from asynq's Inspector and runs by status. They are
// coordinated by name only.
var webSeries = []string{"tunefleet_queue_tasks", "tunefleet_runs"}

// workerSeries names every series a worker's registry exports, as a
// scrape sees them (a histogram as its _bucket, _sum and _count), with a
// GPU sample taken so that the GPU gauges exist.
func workerSeries(t *testing.T) map[string]bool {
	t.Helper()
	w := metrics.NewWorker([]string{"cpu"})
	w.Slots("cpu", 0, 1)
	w.GPUSample(0, gpu.Sample{TemperatureC: 50, SMClockMHz: 1500, PowerMW: 100_000})
	fams, err := w.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range fams {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[f.GetName()+s] = true
			}
		case dto.MetricType_SUMMARY:
			out[f.GetName()], out[f.GetName()+"_sum"], out[f.GetName()+"_count"] = true, true, true
		default:
			out[f.GetName()] = true
		}
	}
	return out
}

// dashboard is the part of Grafana's JSON model the test reads.
type dashboard struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string  `json:"title"`
	Type    string  `json:"type"`
	Panels  []panel `json:"panels"` // a collapsed row's
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// grafanaVar is a dashboard variable in a query: $name or ${name}.
var grafanaVar = regexp.MustCompile(`\$\{?(\w+)\}?`)

// labelValues is a query variable's label_values(metric, label).
var labelValues = regexp.MustCompile(`^label_values\(\s*([^,]+?)\s*,\s*\w+\s*\)$`)

// queries lists every PromQL expression of a dashboard, by where it is.
func queries(data []byte) (map[string]string, error) {
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	out := map[string]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for i, tg := range p.Targets {
				out[fmt.Sprintf("panel %q target %d", p.Title, i)] = tg.Expr
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &q) != nil {
			json.Unmarshal(v.Query, &q.Query) // the older form: a plain string
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			return nil, fmt.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, q.Query)
		}
		out["variable "+v.Name] = m[1]
	}
	return out, nil
}

// metricNames parses a Grafana query as PromQL (its variables replaced by
// values that parse: a range for the interval ones, a match-all regexp for
// the rest) and returns the metric names it selects.
func metricNames(expr string) ([]string, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("empty query")
	}
	expr = grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.Contains(v, "__") {
			return "5m" // $__rate_interval, $__interval, $__range
		}
		return ".*"
	})
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			err = fmt.Errorf("selector %s names no metric", vs)
		}
		names = append(names, name)
		return nil
	})
	return names, err
}

// unknown checks every query of a dashboard against the series known to
// be exported, and returns what it finds wrong, and the series it uses.
func unknown(data []byte, known map[string]bool) (problems []string, used map[string]bool, err error) {
	qs, err := queries(data)
	if err != nil {
		return nil, nil, err
	}
	used = map[string]bool{}
	for where, q := range qs {
		names, err := metricNames(q)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %q: %v", where, q, err))
			continue
		}
		for _, n := range names {
			used[n] = true
			if !known[n] {
				problems = append(problems, fmt.Sprintf("%s: %q names %s, which nothing exports", where, q, n))
			}
		}
	}
	sort.Strings(problems)
	return problems, used, nil
}

// Every query of the Grafana dashboard parses as PromQL and names only
// series the code exports (the worker's registry, or producer serve's two),
// and every tunefleet series a worker exports is on it.
func TestDashboardQueriesNameExportedMetrics(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	known := workerSeries(t)
	for _, s := range webSeries {
		known[s] = true
	}
	problems, used, err := unknown(data, known)
	if err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", dashboardFile, p)
	}
	var unused []string
	for s := range workerSeries(t) {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(s, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(s, "tunefleet_") && !used[s] && !used[base+"_bucket"] && !used[base+"_sum"] && !used[base+"_count"] {
			unused = append(unused, s)
		}
	}
	for _, s := range webSeries {
		if !used[s] {
			unused = append(unused, s)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		t.Errorf("series exported but on no panel of %s: %v", dashboardFile, unused)
	}
	if len(used) < 10 {
		t.Errorf("the dashboard uses only %d series: %v", len(used), used)
	}
}

// The check catches what it is for: a misspelt series, a query that does
// not parse, a selector without a metric name.
func TestDashboardCheckFindsBadQueries(t *testing.T) {
	known := map[string]bool{"tunefleet_runs": true, "tunefleet_tasks_started_total": true}
	tests := []struct {
		name string
		expr string
		want string // in the problem; "" for none
	}{
		{"good", `sum by (status) (tunefleet_runs)`, ""},
		{"grafana variables", `rate(tunefleet_tasks_started_total{queue=~"$queue"}[$__rate_interval])`, ""},
		{"misspelt", `sum(rate(tunefleet_task_started_total[5m]))`, "tunefleet_task_started_total, which nothing exports"},
		{"not PromQL", `sum(rate(tunefleet_runs[5m])`, "unclosed left parenthesis"},
		{"no metric name", `{status="done"}`, "names no metric"},
		{"empty", ``, "empty query"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dash, _ := json.Marshal(map[string]any{"panels": []any{map[string]any{
				"title": "row", "type": "row", "panels": []any{map[string]any{"title": "p", "targets": []any{map[string]any{"expr": tt.expr}}}},
			}}})
			problems, _, err := unknown(dash, known)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want == "" && len(problems) > 0:
				t.Errorf("problems %v in a good query", problems)
			case tt.want != "" && !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tt.want) }):
				t.Errorf("problems %v, want one saying %q", problems, tt.want)
			}
		})
	}
}
