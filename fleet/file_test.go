package fleet_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tunefleet/tunefleet/fleet"
	"github.com/tunefleet/tunefleet/schemas"
	"github.com/tunefleet/tunefleet/state"
)

const goodFleet = `format: tunefleet.fleet/v1
defaults:
  targets: [cpu, cpu.b]
  strategy: max-throughput
  candidates: [ort:cpu:basic, ort:cpu:extended]
  bench_time: 200ms
  owners: [ml-platform@example.com]
models:
  - model: mlp
    bundle: bundles/mlp
  - model: conv
    bundle: /abs/conv.tgz
    targets: [cpu]
    priority: 10
    atol: ["1e-3"]
  - model: off
    bundle: bundles/off
    enabled: false
`

func TestParseGood(t *testing.T) {
	t.Parallel()
	f, err := fleet.Parse("/fleets/fleet.yaml", []byte(goodFleet))
	if err != nil {
		t.Fatal(err)
	}
	es, err := f.Entries()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Model+"@"+e.Target+":"+e.Bundle)
	}
	// Priority first, then model and target; disabled models left out;
	// relative bundles resolved against the fleet file's directory.
	want := []string{"conv@cpu:/abs/conv.tgz", "mlp@cpu:/fleets/bundles/mlp", "mlp@cpu.b:/fleets/bundles/mlp"}
	if !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	if es[1].Options.BenchTime.String() != "200ms" || es[1].Options.Strategy.Name() != "max-throughput" || len(es[1].Options.Candidates) != 2 {
		t.Errorf("defaults not inherited: %+v", es[1].Options)
	}
	if len(es[0].Options.Tolerances) != 1 || len(es[1].Options.Tolerances) != 0 {
		t.Errorf("tolerances: conv %v, mlp %v", es[0].Options.Tolerances, es[1].Options.Tolerances)
	}
	declared, err := fleet.Parse("/fleets/fleet.yaml", []byte(strings.Replace(goodFleet, "defaults:\n", "classes: [gpu.h100]\ndefaults:\n", 1)))
	if err != nil || !slices.Equal(declared.Classes, []string{"gpu.h100"}) || declared.Check() != nil {
		t.Errorf("classes: %v (%v)", declared, err)
	}
	if !strings.HasPrefix(f.Digest, "sha256:") || len(f.Digest) != 7+64 {
		t.Errorf("digest %q", f.Digest)
	}
}

// TestParseBad: every mistake names the file, the line and column that
// hold it and the field, with a did-you-mean for a misspelt key or
// strategy; a mistake in defaults is blamed on its line there, not on a
// model that inherits it.
func TestParseBad(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"typo'd key", strings.Replace(goodFleet, "    priority: 10", "    priorty: 10", 1), `fleet.yaml:14:5: models[1].priorty: unknown key "priorty"; did you mean priority?`},
		{"typo'd default", strings.Replace(goodFleet, "  strategy:", "  stratgy:", 1), `fleet.yaml:4:3: defaults.stratgy: unknown key "stratgy"; did you mean strategy?`},
		{"duplicate model", strings.Replace(goodFleet, "model: conv", "model: mlp", 1), `fleet.yaml:11:12: models[1].model: model "mlp" is listed twice (first on line 9)`},
		{"bad class", strings.Replace(goodFleet, "[cpu, cpu.b]", "[cpu, GPU H100]", 1), `fleet.yaml:3:12: defaults.targets: target "GPU H100" must be`},
		{"duplicate target", strings.Replace(goodFleet, "[cpu, cpu.b]", "[cpu, cpu]", 1), `fleet.yaml:3:12: defaults.targets: lists target cpu twice`},
		{"bad candidate", strings.Replace(goodFleet, "ort:cpu:extended", "ort:cpu:ext ended", 1), `fleet.yaml:5:15: defaults.candidates: candidate "ort:cpu:ext ended"`},
		{"bad strategy", strings.Replace(goodFleet, "strategy: max-throughput", "strategy: max-throughpt", 1), `fleet.yaml:4:13: defaults.strategy: unknown strategy "max-throughpt"; did you mean max-throughput?`},
		{"bad duration", strings.Replace(goodFleet, "200ms", "soon", 1), `fleet.yaml:6:15: defaults.bench_time: "soon" is not a positive duration`},
		{"bad tolerance", strings.Replace(goodFleet, `["1e-3"]`, `["x=y"]`, 1), `fleet.yaml:15:11: models[1].atol: --atol "x=y"`},
		{"no bundle", strings.Replace(goodFleet, "    bundle: bundles/mlp\n", "", 1), `fleet.yaml:9: models[0]: model "mlp" has no bundle`},
		{"wrong format", strings.Replace(goodFleet, "fleet/v1", "fleet/v9", 1), `fleet.yaml:1:9: format: is "tunefleet.fleet/v9": want "tunefleet.fleet/v1"`},
		{"bad declared class", strings.Replace(goodFleet, "defaults:\n", "classes: [gpu.h100, GPU H100]\ndefaults:\n", 1), `classes: target "GPU H100" must be`},
		{"wrong type", strings.Replace(goodFleet, "priority: 10", "priority: high", 1), "fleet.yaml:14:15: models[1].priority: cannot unmarshal !!str `high` into int"},
		{"no models", "format: tunefleet.fleet/v1\nmodels: []\n", "no models"},
		{"empty", "", "empty"},
		{"two documents", goodFleet + "---\nformat: x\n", "fleet.yaml:19:1: a second YAML document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := fleet.Parse("fleet.yaml", []byte(tc.yaml))
			if err == nil {
				err = f.Check()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "fleet.yaml") || strings.Contains(err.Error(), "problems") {
				t.Errorf("error %q does not name the file, or is not the one problem", err)
			}
		})
	}
}

// Three mistakes — a misspelt key in a model, a misspelt strategy in
// defaults, a model listed twice — are three problems from one Load, each
// at the line that holds it, in the file's order.
func TestLoadReportsEveryMistake(t *testing.T) {
	t.Parallel()
	bad := strings.Replace(goodFleet, "strategy: max-throughput", "strategy: max-throughpt", 1)
	bad = strings.Replace(bad, "    priority: 10", "    priorty: 10", 1)
	bad = strings.Replace(bad, "model: off", "model: mlp", 1)
	p := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := fleet.Load(p)
	var probs fleet.Problems
	if !errors.As(err, &probs) || len(probs) != 3 {
		t.Fatalf("Load: %v, want 3 problems", err)
	}
	for i, want := range []string{
		p + `:4:13: defaults.strategy: unknown strategy "max-throughpt"; did you mean max-throughput?`,
		p + `:14:5: models[1].priorty: unknown key "priorty"; did you mean priority?`,
		p + `:16:12: models[2].model: model "mlp" is listed twice (first on line 9)`,
	} {
		if got := probs[i].Error(); !strings.HasPrefix(got, want) {
			t.Errorf("problem %d: %q, want %q", i+1, got, want)
		}
	}
	if msg := err.Error(); !strings.HasPrefix(msg, p+": 3 problems:\n  "+p+":4:13:") {
		t.Errorf("the message:\n%s", msg)
	}
}

// TestSchemaInSync: schemas/fleet.schema.json takes exactly the keys the Go
// types decode, and agrees with the parser on a good and a typo'd file.
func TestSchemaInSync(t *testing.T) {
	t.Parallel()
	raw, err := schemas.Raw(schemas.Fleet)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties map[string]any `json:"properties"`
		Defs       struct {
			Settings struct {
				Properties map[string]any `json:"properties"`
			} `json:"settings"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	models := s.Properties["models"].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any)
	for _, tc := range []struct {
		what   string
		typ    reflect.Type
		schema map[string]any
	}{
		{"fleet file", reflect.TypeFor[fleet.File](), s.Properties},
		{"defaults", reflect.TypeFor[fleet.Settings](), s.Defs.Settings.Properties},
		{"model entry", reflect.TypeFor[fleet.Model](), models},
	} {
		got := slices.Sorted(mapsKeys(tc.schema))
		want := yamlKeys(tc.typ)
		if !slices.Equal(got, want) {
			t.Errorf("%s: schema has %v, Go decodes %v", tc.what, got, want)
		}
	}
	for _, tc := range []struct {
		yaml string
		ok   bool
	}{
		{goodFleet, true},
		{strings.Replace(goodFleet, "    priority: 10", "    priorty: 10", 1), false},
		{strings.Replace(goodFleet, "  strategy:", "  stratgy:", 1), false},
	} {
		var doc any
		if err := yaml.Unmarshal([]byte(tc.yaml), &doc); err != nil {
			t.Fatal(err)
		}
		js, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		_, verr := schemas.ValidateJSON(schemas.Fleet, "", js)
		_, perr := fleet.Parse("fleet.yaml", []byte(tc.yaml))
		if (verr == nil) != tc.ok || (perr == nil) != tc.ok {
			t.Errorf("schema says %v, parser says %v, want ok=%v", verr, perr, tc.ok)
		}
	}
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// yamlKeys are the keys a struct decodes, inline structs flattened.
func yamlKeys(typ reflect.Type) []string {
	var out []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case strings.Contains(opts, "inline"):
			out = append(out, yamlKeys(f.Type)...)
		default:
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// TestPlanSchemaInSync: schemas/plan.schema.json has exactly fleet.Plan's
// and fleet.PlanEntry's JSON members, every one required (the contract
// with the morning report).
func TestPlanSchemaInSync(t *testing.T) {
	t.Parallel()
	raw, err := schemas.Raw(schemas.Plan)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Required   []string       `json:"required"`
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	items := s.Properties["entries"].(map[string]any)["items"].(map[string]any)
	var entryReq []string
	for _, r := range items["required"].([]any) {
		entryReq = append(entryReq, r.(string))
	}
	for _, tc := range []struct {
		what     string
		typ      reflect.Type
		props    map[string]any
		required []string
	}{
		{"plan", reflect.TypeFor[state.Plan](), s.Properties, s.Required},
		{"plan entry", reflect.TypeFor[state.PlanEntry](), items["properties"].(map[string]any), entryReq},
	} {
		var want []string
		for i := range tc.typ.NumField() {
			name, _, _ := strings.Cut(tc.typ.Field(i).Tag.Get("json"), ",")
			want = append(want, name)
		}
		slices.Sort(want)
		if got := slices.Sorted(mapsKeys(tc.props)); !slices.Equal(got, want) {
			t.Errorf("%s: schema has %v, Go writes %v", tc.what, got, want)
		}
		if got := slices.Sorted(slices.Values(tc.required)); !slices.Equal(got, want) {
			t.Errorf("%s: schema requires %v, want all of %v", tc.what, got, want)
		}
	}
}

// warmup: is a setting like bench_time: the defaults' value, overridden by
// a model's own (zero leaves the measurement's default, a quarter of the
// bench time).
func TestWarmupSetting(t *testing.T) {
	t.Parallel()
	f, err := fleet.Parse("/fleets/fleet.yaml", []byte(`format: tunefleet.fleet/v1
defaults:
  targets: [cpu]
  candidates: [ort:cpu:basic]
  warmup: 40ms
models:
  - model: a
    bundle: a
  - model: b
    bundle: b
    warmup: 1s
`))
	if err != nil {
		t.Fatal(err)
	}
	es, err := f.Entries()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]time.Duration{}
	for _, e := range es {
		got[e.Model] = e.Options.Warmup
	}
	if got["a"] != 40*time.Millisecond || got["b"] != time.Second {
		t.Errorf("warm-up a %s (want the defaults' 40ms), b %s (want its own 1s)", got["a"], got["b"])
	}
}

// find_max_batch: is a setting: the defaults' value, which a model may
// turn off (or on) for itself; left out everywhere, it is off.
func TestFindMaxBatchSetting(t *testing.T) {
	t.Parallel()
	f, err := fleet.Parse("/fleets/fleet.yaml", []byte(`format: tunefleet.fleet/v1
defaults:
  targets: [cpu]
  candidates: [ort:cpu:basic]
  find_max_batch: true
models:
  - model: a
    bundle: a
  - model: b
    bundle: b
    find_max_batch: false
`))
	if err != nil {
		t.Fatal(err)
	}
	es, err := f.Entries()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range es {
		got[e.Model] = e.Options.FindMaxBatch
	}
	if !got["a"] || got["b"] {
		t.Errorf("find_max_batch a %v (want the defaults' true), b %v (want its own false)", got["a"], got["b"])
	}
	f, err = fleet.Parse("/fleets/fleet.yaml", []byte("format: tunefleet.fleet/v1\ndefaults:\n  targets: [cpu]\n  candidates: [ort:cpu:basic]\nmodels:\n  - model: a\n    bundle: a\n"))
	if err != nil {
		t.Fatal(err)
	}
	if es, err = f.Entries(); err != nil || es[0].Options.FindMaxBatch {
		t.Errorf("left out: find_max_batch %v (%v), want false", es, err)
	}
}
