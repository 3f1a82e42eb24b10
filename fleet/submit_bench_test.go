package fleet_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/fleet"
	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/internal/onnxpb"
	"github.com/tunefleet/tunefleet/internal/testkit/onnxtest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
)

// submitFleet is a fleet of one-graph models for the nightly-submit
// benchmark: every model's graph is the same Identity graph, its bundle a
// copy of one template (files of its own: each is opened and hashed as a
// real model's would be).
type submitFleet struct {
	dir   string // the fleet's directory: fleet.yaml and bundles/
	tmpl  string // the template bundle
	man   bundle.Manifest
	input string // the template's sample input, bundle-relative
	model func(k int) string
}

// identityTemplate writes a one-graph bundle of an Identity node over a
// float32 [1,8], its reference output recorded by ONNX Runtime.
func identityTemplate(tb testing.TB) (string, bundle.Manifest) {
	tb.Helper()
	dir := tb.TempDir()
	model := filepath.Join(dir, "identity.onnx")
	ob := onnxtest.New("identity", 13).
		Input("input", onnxpb.TensorProto_FLOAT, int64(1), int64(8)).
		Output("output", onnxpb.TensorProto_FLOAT, int64(1), int64(8)).
		Node("Identity", []string{"input"}, []string{"output"})
	if err := ob.Write(model); err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(dir, "part")
	b, err := bundlegen.FromONNX(context.Background(), model, out, bundlegen.ONNXOptions{
		Samples: 1, Seed: 1, Reference: ort.New(ort.Options{}), WorkDir: tb.TempDir(), Model: "template",
	})
	if err != nil {
		tb.Fatalf("the identity template bundle: %v", err)
	}
	return out, b.Manifest
}

// writeSubmitFleet writes n models (prefix_00000…) as copies of the
// template and the fleet file listing them.
func writeSubmitFleet(tb testing.TB, tmpl string, man bundle.Manifest, dir, prefix string, n int) *submitFleet {
	tb.Helper()
	f := &submitFleet{dir: dir, tmpl: tmpl, man: man, model: func(k int) string { return fmt.Sprintf("%s_%05d", prefix, k) }}
	f.input = filepath.ToSlash(filepath.Join(man.Graphs[0].Samples[0], "input_0.pb"))
	files := map[string][]byte{}
	for _, p := range man.Graphs[0].Paths() {
		data, err := os.ReadFile(filepath.Join(tmpl, filepath.FromSlash(p)))
		if err != nil {
			tb.Fatal(err)
		}
		files[p] = data
	}
	var yaml strings.Builder
	yaml.WriteString("format: tunefleet.fleet/v1\nclasses: [cpu]\ndefaults:\n  targets: [cpu]\n  strategy: first-wins\n  candidates: [ort:cpu:basic]\n  bench_time: 100ms\nmodels:\n")
	for k := range n {
		name := f.model(k)
		bdir := filepath.Join(dir, "bundles", name)
		for p, data := range files {
			dst := filepath.Join(bdir, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				tb.Fatal(err)
			}
			if err := os.WriteFile(dst, data, 0o644); err != nil {
				tb.Fatal(err)
			}
		}
		m := man
		m.Model = name
		if err := writeManifest(bdir, m); err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(&yaml, "  - model: %s\n    bundle: bundles/%s\n", name, name)
	}
	if err := os.WriteFile(filepath.Join(dir, "fleet.yaml"), []byte(yaml.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	return f
}

func writeManifest(dir string, m bundle.Manifest) error {
	data, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, bundle.ManifestName), data, 0o644)
}

// resample gives every model's graph new sample bytes (an Identity: the
// reference output is the input), so that its files are new content: a
// cold night's.
func (f *submitFleet) resample(tb testing.TB, n int, rng *rand.Rand) {
	tb.Helper()
	g := f.man.Graphs[0]
	out := filepath.ToSlash(filepath.Join(g.Samples[0], "output_0.pb"))
	in, err := bundle.ReadTensorFile(filepath.Join(f.tmpl, filepath.FromSlash(f.input)))
	if err != nil {
		tb.Fatal(err)
	}
	ref, err := bundle.ReadTensorFile(filepath.Join(f.tmpl, filepath.FromSlash(out)))
	if err != nil {
		tb.Fatal(err)
	}
	for k := range n {
		raw := make([]byte, len(in.Data))
		for i := 0; i+4 <= len(raw); i += 4 {
			binary.LittleEndian.PutUint32(raw[i:], math.Float32bits(rng.Float32()))
		}
		bdir := filepath.Join(f.dir, "bundles", f.model(k))
		for _, t := range []struct {
			rel string
			t   bundle.Tensor
		}{{f.input, in}, {out, ref}} {
			t.t.Data = raw
			data, err := bundle.EncodeTensorProto(t.t)
			if err != nil {
				tb.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(bdir, filepath.FromSlash(t.rel)), data, 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// submitNight runs one nightly over the fleet and returns its wall time.
func submitNight(tb testing.TB, rdb redis.UniversalClient, store artifacts.Store, fleetPath string, date time.Time, profile string) (time.Duration, *state.Plan) {
	return submitNightP(tb, rdb, store, fleetPath, date, profile, 0)
}

func submitNightP(tb testing.TB, rdb redis.UniversalClient, store artifacts.Store, fleetPath string, date time.Time, profile string, parallel int) (time.Duration, *state.Plan) {
	tb.Helper()
	return submitNightO(tb, rdb, store, fleetPath, fleet.Options{Date: date}, profile, func(s *fleet.Submitter) { s.Parallel = parallel })
}

// submitNightO submits the fleet's night with o (o.Date the night), by a
// Submitter that each of with adjusts.
func submitNightO(tb testing.TB, rdb redis.UniversalClient, store artifacts.Store, fleetPath string, o fleet.Options, profile string, with ...func(*fleet.Submitter)) (time.Duration, *state.Plan) {
	tb.Helper()
	date := o.Date
	f, err := fleet.Load(fleetPath)
	if err != nil {
		tb.Fatal(err)
	}
	c := jobs.NewClient(rdb, store)
	defer c.Close()
	sub := &fleet.Submitter{Redis: rdb, Store: store, Client: c, Backends: backend.Registry{"ort": ort.New(ort.Options{})}}
	for _, w := range with {
		w(sub)
	}
	if profile != "" {
		pf, err := os.Create(profile)
		if err != nil {
			tb.Fatal(err)
		}
		defer pf.Close()
		pprof.StartCPUProfile(pf)
		defer pprof.StopCPUProfile()
	}
	began := time.Now()
	plan, existed, err := sub.Submit(context.Background(), f, o)
	took := time.Since(began)
	if err != nil || existed {
		tb.Fatalf("nightly of %s: existed %v, %v", date.Format(time.DateOnly), existed, err)
	}
	return took, plan
}

// BenchmarkNightlySubmitWide is the fleet simulator's night (make
// bench-fleet's 10,000 graphs) without the simulator: 20 models of 500
// graphs (the files hard-linked, the graphs named apart), cold, its CPU
// profiled into TUNEFLEET_SUBMIT_PROFILE/wide.pprof when set. It prints the
// night's time a graph against issue 35's 0.1 ms (one run: information).
func BenchmarkNightlySubmitWide(b *testing.B) {
	needScaleBench(b)
	orttest.Need(b)
	const models, graphs = 20, 500
	rdb := ownRedis(b)
	tmpl, _ := identityTemplate(b)
	parts := make([]string, graphs)
	for i := range parts {
		parts[i] = tmpl
	}
	wide := filepath.Join(b.TempDir(), "wide")
	wb, err := bundlegen.Merge(parts, wide, "wide")
	if err != nil {
		b.Fatal(err)
	}
	root := b.TempDir()
	var yaml strings.Builder
	yaml.WriteString("format: tunefleet.fleet/v1\nclasses: [cpu]\ndefaults:\n  targets: [cpu]\n  strategy: first-wins\n  candidates: [ort:cpu:basic]\n  bench_time: 100ms\nmodels:\n")
	for k := range models {
		name := fmt.Sprintf("wide_%02d", k)
		bdir := filepath.Join(root, "bundles", name)
		filepath.WalkDir(wide, func(p string, d os.DirEntry, err error) error {
			rel, _ := filepath.Rel(wide, p)
			switch {
			case d.IsDir():
				return os.MkdirAll(filepath.Join(bdir, rel), 0o755)
			case rel == bundle.ManifestName:
				return nil
			}
			return os.Link(p, filepath.Join(bdir, rel))
		})
		m := wb.Manifest
		m.Model = name
		m.Graphs = append([]bundle.Graph(nil), m.Graphs...)
		for i := range m.Graphs {
			m.Graphs[i].Name = strconv.Itoa(k*graphs + i)
		}
		if err := writeManifest(bdir, m); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&yaml, "  - model: %s\n    bundle: bundles/%s\n", name, name)
	}
	fleetPath := filepath.Join(root, "fleet.yaml")
	os.WriteFile(fleetPath, []byte(yaml.String()), 0o644)
	storeDir := filepath.Join(root, "store")
	os.MkdirAll(storeDir, 0o755)
	store, err := artifacts.NewLocal(storeDir)
	if err != nil {
		b.Fatal(err)
	}
	if err := runstate.RegisterPlatforms(context.Background(), rdb, []string{"cpu"}, []string{"cpu-test-platform"}, time.Now()); err != nil {
		b.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	prof := ""
	if d := os.Getenv("TUNEFLEET_SUBMIT_PROFILE"); d != "" {
		prof = filepath.Join(d, "wide.pprof")
	}
	took, _ := submitNight(b, rdb, store, fleetPath, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), prof)
	fmt.Printf("nightly submit, cold night of %d models × %d graphs: %v, %.3f ms a graph (issue 35: 0.1 ms)\n", models, graphs, took.Round(time.Millisecond), took.Seconds()*1e3/float64(models*graphs))
}
