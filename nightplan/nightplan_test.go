package nightplan

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFill(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tasks    []Task
		fallback float64
		want     []float64
		guessed  []bool
	}{
		{"median of the class's known", []Task{{Class: "a", Seconds: 10, Known: true}, {Class: "a", Seconds: 30, Known: true}, {Class: "a", Seconds: 20, Known: true}, {Class: "a", Guess: 99}}, 0, []float64{10, 30, 20, 20}, []bool{false, false, false, false}},
		{"even count: the mean of the middle two", []Task{{Class: "a", Seconds: 10, Known: true}, {Class: "a", Seconds: 40, Known: true}, {Class: "a"}}, 0, []float64{10, 40, 25}, []bool{false, false, false}},
		{"another class's history is not this one's", []Task{{Class: "a", Seconds: 10, Known: true}, {Class: "b"}}, 7, []float64{10, 7}, []bool{false, true}},
		{"no history at all and no guess: DefaultSeconds", []Task{{Class: "a"}, {Class: "a"}}, 0, []float64{DefaultSeconds, DefaultSeconds}, []bool{true, true}},
		{"no history at all: each its own guess", []Task{{Class: "a", Guess: 4}, {Class: "a", Guess: 2}, {Class: "a"}}, 0, []float64{4, 2, DefaultSeconds}, []bool{true, true, true}},
		{"a fallback replaces the guesses, still a guess", []Task{{Class: "a", Guess: 4}}, 7, []float64{7}, []bool{true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			Fill(tc.tasks, tc.fallback)
			var got []float64
			for _, x := range tc.tasks {
				got = append(got, x.Seconds)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			for i, x := range tc.tasks {
				if x.Guessed != tc.guessed[i] {
					t.Errorf("task %d: guessed %v, want %v", i, x.Guessed, tc.guessed[i])
				}
			}
		})
	}
}

func TestGuess(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    GraphWork
		want float64
	}{
		{"one ort candidate, fixed batch: a build and one measurement", GraphWork{Backends: []string{"ort"}, BenchTime: 2 * time.Second, Warmup: 500 * time.Millisecond}, 1 + 2.5},
		{"the sweep counts at most three batch sizes", GraphWork{Backends: []string{"ort"}, BatchSizes: 11, BenchTime: 2 * time.Second, Warmup: 500 * time.Millisecond}, 1 + 3*2.5},
		{"two candidates, two of everything", GraphWork{Backends: []string{"ort", "ort"}, BatchSizes: 2, BenchTime: time.Second}, 2 * (1 + 2*1)},
		{"reading the graph: 200 MiB a second", GraphWork{Backends: []string{"ort"}, BenchTime: time.Second, ModelBytes: 400 << 20}, 1 + 2 + 1},
		{"TensorRT builds take minutes", GraphWork{Backends: []string{"trt"}, BenchTime: time.Second}, 300 + 1},
		{"no candidate: nothing to do", GraphWork{BenchTime: time.Second}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Guess(tc.w); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("Guess(%+v) = %v, want %v", tc.w, got, tc.want)
			}
		})
	}
}

func TestPick(t *testing.T) {
	ab := []string{"trt:fp16", "ort:cpu"}
	newest := Past{Candidates: []string{"trt:fp16"}, Seconds: map[string]float64{"0": 1}}
	match := Past{Candidates: ab, Seconds: map[string]float64{"0": 2}}
	older := Past{Candidates: ab, Seconds: map[string]float64{"0": 3}}
	legacy := Past{Seconds: map[string]float64{"0": 4}}
	for _, tc := range []struct {
		name  string
		pasts []Past
		want  float64 // graph 0's; 0: none picked
	}{
		{"the median of those with the same candidates", []Past{newest, match, older, {Candidates: ab, Seconds: map[string]float64{"0": 9}}}, 3},
		{"two: their mean", []Past{newest, match, older}, 2.5},
		{"a legacy entry only when none matches", []Past{legacy, match}, 2},
		{"legacy when nothing matches", []Past{newest, legacy}, 4},
		{"another candidate set is not used", []Past{newest}, 0},
		{"no history", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Pick(tc.pasts, ab)["0"]; got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tasks []Task
		want  []int
	}{
		{"longest first", []Task{{Class: "a", Seconds: 1, Index: 0}, {Class: "a", Seconds: 30, Index: 1}, {Class: "a", Seconds: 5, Index: 2}}, []int{1, 2, 0}},
		{"priority before length", []Task{{Class: "a", Seconds: 30}, {Class: "a", Seconds: 1, Priority: 1, Index: 1}}, []int{1, 0}},
		{"ties in submission order", []Task{{Class: "a", Seconds: 2, Index: 0}, {Class: "a", Seconds: 2, Index: 1}, {Class: "a", Seconds: 2, Index: 2}}, []int{0, 1, 2}},
		{"grouped by class", []Task{{Class: "b", Seconds: 9}, {Class: "a", Seconds: 1, Index: 1}, {Class: "b", Seconds: 10, Index: 2}}, []int{1, 2, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Order(tc.tasks); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMakespanAndLowerBound(t *testing.T) {
	short := func(n int, d float64) []float64 { return slices.Repeat([]float64{d}, n) }
	for _, tc := range []struct {
		name        string
		durations   []float64
		workers     int
		want, want2 float64 // makespan, lower bound
	}{
		{"one worker: the sum", []float64{1, 2, 3}, 1, 6, 6},
		{"long last: an idle tail", append(short(8, 1), 4), 2, 8, 6},
		{"long first: the bound", append([]float64{4}, short(8, 1)...), 2, 6, 6},
		{"more workers than work: the longest", []float64{3, 1}, 4, 3, 3},
		{"no work", nil, 2, 0, 0},
		{"no worker", []float64{1}, 0, math.Inf(1), math.Inf(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Makespan(tc.durations, tc.workers); got != tc.want {
				t.Errorf("makespan %v, want %v", got, tc.want)
			}
			if got := LowerBound(tc.durations, tc.workers); got != tc.want2 && len(tc.durations) > 0 {
				t.Errorf("lower bound %v, want %v", got, tc.want2)
			}
		})
	}
}

func TestWorkersToFit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		durations []float64
		within    float64
		want      int
		ok        bool
	}{
		{"one is enough", []float64{1, 1}, 2, 1, true},
		{"ten hours of work in four", slices.Repeat([]float64{3600}, 10), 4 * 3600, 3, true},
		{"a graph longer than the night", []float64{10, 1}, 5, 0, false},
		{"no work", nil, 1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, ok := WorkersToFit(tc.durations, tc.within)
			if n != tc.want || ok != tc.ok {
				t.Errorf("got %d %v, want %d %v", n, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestPlanFinishAndShort(t *testing.T) {
	tasks := []Task{{Class: "gpu", Seconds: 3600}, {Class: "gpu", Seconds: 3600, Index: 1}, {Class: "gpu", Seconds: 3600, Index: 2}, {Class: "cpu", Seconds: 60, Index: 3}}
	start := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		workers  map[string]int
		finish   string // "" : unknown
		deadline time.Time
		short    []string
	}{
		{"enough workers", map[string]int{"gpu": 3, "cpu": 1}, "02:00", start.Add(2 * time.Hour), nil},
		{"one gpu short", map[string]int{"gpu": 1, "cpu": 1}, "04:00", start.Add(2 * time.Hour), []string{"gpu: 1 worker(s), 2 would fit"}},
		{"no gpu worker", map[string]int{"cpu": 1}, "", start.Add(90 * time.Minute), []string{"gpu: no worker, 3 would fit"}},
		{"nothing fits", map[string]int{"gpu": 9, "cpu": 1}, "02:00", start.Add(30 * time.Minute), []string{"gpu: its longest graph alone is expected to take 1h00m, past the deadline with any number of workers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := Plan(tasks, Order(tasks), tc.workers)
			f, ok := Finish(start, cp)
			got := ""
			if ok {
				got = f.Format("15:04")
			}
			if got != tc.finish {
				t.Errorf("finish %q, want %q", got, tc.finish)
			}
			var short []string
			for _, s := range ShortOf(cp, start, tc.deadline) {
				short = append(short, s.String())
			}
			if !slices.Equal(short, tc.short) {
				t.Errorf("short %q, want %q", short, tc.short)
			}
		})
	}
}

func TestParseWorkers(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want map[string]int
		err  string
	}{
		{[]string{"gpu.h100=4", "cpu=2,gpu.a10=1"}, map[string]int{"gpu.h100": 4, "cpu": 2, "gpu.a10": 1}, ""},
		{[]string{"gpu.h100"}, nil, "want CLASS=N"},
		{[]string{"gpu=0"}, nil, "positive"},
		{[]string{"=3"}, nil, "want CLASS=N"},
	} {
		got, err := ParseWorkers(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%q: %v, %v", tc.in, got, err)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%q: %s=%d, want %d", tc.in, k, got[k], v)
			}
		}
	}
}

func TestParseDeadline(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no zoneinfo:", err)
	}
	now := time.Date(2026, 12, 1, 22, 30, 0, 0, time.UTC) // 23:30 in Paris
	for _, tc := range []struct {
		in   string
		loc  *time.Location
		want string // RFC 3339, "" for an error
	}{
		{"06:00", time.UTC, "2026-12-02T06:00:00Z"},
		{"23:00", time.UTC, "2026-12-01T23:00:00Z"},
		{"22:00", time.UTC, "2026-12-02T22:00:00Z"},
		{"06:00", paris, "2026-12-02T06:00:00+01:00"},
		{"06:00 Europe/Paris", time.UTC, "2026-12-02T06:00:00+01:00"},
		{"23:45 Europe/Paris", time.UTC, "2026-12-01T23:45:00+01:00"},
		{"06:00+09:00", time.UTC, "2026-12-03T06:00:00+09:00"}, // 07:30 there already,
		{"2026-12-02T05:00:00Z", time.UTC, "2026-12-02T05:00:00Z"},
		{"6am", time.UTC, ""},
		{"06:00 Mars/Olympus", time.UTC, ""},
		{"25:00", time.UTC, ""},
	} {
		got, err := ParseDeadline(tc.in, now, tc.loc)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%q: %v, want an error", tc.in, got)
		case tc.want == "":
			if !strings.Contains(err.Error(), "--deadline") {
				t.Errorf("%q: error %v does not name --deadline", tc.in, err)
			}
		case err != nil || got.Format(time.RFC3339) != tc.want:
			t.Errorf("%q: %v, %v, want %s", tc.in, got.Format(time.RFC3339), err, tc.want)
		}
	}
}
