package backend_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
)

func TestParseCandidate(t *testing.T) {
	tests := []struct {
		in          string
		backend     string
		positionals []string
		options     map[string]string
		canonical   string
		err         string
	}{
		{in: "ort:cpu:basic", backend: "ort", positionals: []string{"cpu", "basic"}, canonical: "ort:cpu:basic"},
		{in: "ort:cpu:extended:threads=1", backend: "ort", positionals: []string{"cpu", "extended"},
			options: map[string]string{"threads": "1"}, canonical: "ort:cpu:extended:threads=1"},
		{in: "trt:fp32:noTF32", backend: "trt", positionals: []string{"fp32", "noTF32"}, canonical: "trt:fp32:noTF32"},
		{in: "trt:fp16:opt=5:workspace=1024", backend: "trt", positionals: []string{"fp16"},
			options: map[string]string{"opt": "5", "workspace": "1024"}, canonical: "trt:fp16:opt=5:workspace=1024"},
		{in: "trt:fp16:workspace=1024:opt=5", backend: "trt", positionals: []string{"fp16"},
			options: map[string]string{"opt": "5", "workspace": "1024"}, canonical: "trt:fp16:opt=5:workspace=1024"},
		{in: "trt", backend: "trt", canonical: "trt"},
		{in: "  ort:cpu  ", backend: "ort", positionals: []string{"cpu"}, canonical: "ort:cpu"},
		{in: "trt:fp16.int8-x_y", backend: "trt", positionals: []string{"fp16.int8-x_y"}, canonical: "trt:fp16.int8-x_y"},
		{in: "ort:k=a=b", backend: "ort", options: map[string]string{"k": "a=b"}, canonical: "ort:k=a=b"},

		{in: "", err: "empty candidate (write e.g. ort:cpu:basic)"},
		{in: "   ", err: "empty candidate"},
		{in: ":cpu", err: `candidate ":cpu": backend name "" must be letters and digits`},
		{in: "o rt:cpu", err: `backend name "o rt"`},
		{in: "ort::x", err: `candidate "ort::x": part "" must be letters, digits, '-', '_' or '.'`},
		{in: "ort:cpu:", err: `part ""`},
		{in: "ort:cpu!", err: `part "cpu!" must be`},
		{in: "trt:fp16+int8", err: `part "fp16+int8" must be`},
		{in: "ort:cpu/gpu", err: `part "cpu/gpu"`},
		{in: "ort:cpu:threads=1:threads=2", err: `candidate "ort:cpu:threads=1:threads=2": option "threads" given twice`},
		{in: "ort:threads=1:cpu", err: `"cpu" comes after a key=value option; put positional parts first`},
		{in: "ort:=1", err: `option "=1" must be key=value`},
		{in: "ort:threads=", err: `option "threads=" must be key=value`},
		{in: "ort:thr eads=1", err: `option "thr eads=1" must be key=value`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			c, err := backend.ParseCandidate(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseCandidate(%q) = %v, %v; want an error saying %q", tt.in, c, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseCandidate(%q): %v", tt.in, err)
			}
			if c.Backend != tt.backend || !slices.Equal(c.Positionals, tt.positionals) || !maps.Equal(c.Options, tt.options) {
				t.Errorf("ParseCandidate(%q) = %#v", tt.in, c)
			}
			if got := c.String(); got != tt.canonical {
				t.Errorf("String() = %q, want %q", got, tt.canonical)
			}
			again, err := backend.ParseCandidate(c.String())
			if err != nil || again.String() != c.String() {
				t.Errorf("the canonical form does not parse back: %v, %v", again, err)
			}
		})
	}
}

func TestParseCandidates(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{in: "ort:cpu:basic", want: []string{"ort:cpu:basic"}},
		{in: "ort:cpu:basic,ort:cpu:extended:threads=1, trt:fp16", want: []string{"ort:cpu:basic", "ort:cpu:extended:threads=1", "trt:fp16"}},
		{in: "trt:fp16:b=1:a=2,trt:fp16:a=2:b=1", err: `candidate "trt:fp16:a=2:b=1" is listed twice`},
		{in: "ort:cpu, ort:cpu", err: `candidate "ort:cpu" is listed twice`},
		{in: "", err: "empty candidate"},
		{in: "ort:cpu,", err: "empty candidate"},
		{in: "ort:cpu,,trt", err: "empty candidate"},
		{in: "ort:cpu,trt::x", err: `candidate "trt::x"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			cs, err := backend.ParseCandidates(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseCandidates(%q) = %v, %v; want an error saying %q", tt.in, cs, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range cs {
				got = append(got, c.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ParseCandidates(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestCandidateJSON(t *testing.T) {
	type doc struct {
		Candidates []backend.Candidate `json:"candidates"`
		Winner     backend.Candidate   `json:"winner"`
	}
	cs, err := backend.ParseCandidates("trt:fp16:workspace=1024:opt=5,ort:cpu:basic")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(doc{Candidates: cs, Winner: cs[1]})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"candidates":["trt:fp16:opt=5:workspace=1024","ort:cpu:basic"],"winner":"ort:cpu:basic"}`
	if string(b) != want {
		t.Errorf("Marshal = %s\nwant      %s", b, want)
	}
	var back doc
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Candidates) != 2 || back.Candidates[0].String() != cs[0].String() || back.Winner.Backend != "ort" ||
		!maps.Equal(back.Candidates[0].Options, cs[0].Options) {
		t.Errorf("round trip = %+v", back)
	}
	for _, bad := range []string{`{"winner":"ort::x"}`, `{"winner":""}`, `{"winner":3}`} {
		var d doc
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("Unmarshal(%s) succeeded: %+v", bad, d)
		}
	}
}
