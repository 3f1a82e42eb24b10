package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/tuner"
)

// On a terminal the status line is redrawn in place (carriage return,
// clear line), cut to the terminal's width, kept below the tuner's step
// lines and cleared at the end; elsewhere each phase and batch size start
// is a plain line and call counts are left out.
func TestTuneProgress(t *testing.T) {
	t.Parallel()
	steps := []tuner.Step{
		{Graph: "0", Candidate: "ort:cpu:basic", Index: 0, Count: 2, Phase: tuner.PhaseBuild},
		{Graph: "0", Candidate: "ort:cpu:basic", Index: 0, Count: 2, Phase: tuner.PhaseBuild, Done: true},
		{Graph: "0", Candidate: "ort:cpu:basic", Index: 0, Count: 2, Phase: tuner.PhaseCheck},
		{Graph: "0", Candidate: "ort:cpu:basic", Index: 0, Count: 2, Phase: tuner.PhaseBenchmark},
		{Graph: "0", Candidate: "ort:cpu:basic", Index: 0, Count: 2, Phase: tuner.PhaseBenchmark, BatchSize: 8},
		{Graph: "0", Candidate: "ort:cpu:basic", Index: 0, Count: 2, Phase: tuner.PhaseBenchmark, BatchSize: 8, Calls: 1234},
	}
	t.Run("terminal", func(t *testing.T) {
		var buf bytes.Buffer
		p := &tuneProgress{w: &buf, tty: true, width: 200}
		for _, s := range steps {
			p.observe(s)
		}
		p.Write([]byte("graph 0: ort:cpu:basic: built in 5ms\n"))
		p.finish()
		out := buf.String()
		want := "\r\x1b[Kgraph 0 · candidate 1/2 ort:cpu:basic · benchmark · batch 8 · 0 calls"
		if !strings.Contains(out, want) {
			t.Errorf("no status line %q in %q", want, out)
		}
		// The step line clears the status, and the status comes back
		// below it; finish clears it for good.
		if !strings.Contains(out, "\r\x1b[Kgraph 0: ort:cpu:basic: built in 5ms\n\r\x1b[Kgraph 0 · candidate 1/2") || !strings.HasSuffix(out, "\r\x1b[K") {
			t.Errorf("step line not kept above the status, or status not cleared: %q", out)
		}
		if strings.Count(out, "\n") != 1 {
			t.Errorf("the status line is not redrawn in place: %q", out)
		}

		buf.Reset()
		narrow := &tuneProgress{w: &buf, tty: true, width: 20}
		narrow.observe(steps[4])
		if line := strings.TrimPrefix(buf.String(), "\r\x1b[K"); len([]rune(line)) >= 20 || !strings.HasSuffix(line, "…") {
			t.Errorf("status %q is not cut to a 20-column terminal", line)
		}
	})
	t.Run("plain", func(t *testing.T) {
		var buf bytes.Buffer
		p := &tuneProgress{w: &buf}
		for _, s := range steps {
			p.observe(s)
		}
		p.finish()
		want := "graph 0: ort:cpu:basic (1/2): building\n" +
			"graph 0: ort:cpu:basic (1/2): checking outputs\n" +
			"graph 0: ort:cpu:basic (1/2): benchmarking\n" +
			"graph 0: ort:cpu:basic (1/2): measuring batch 8\n"
		if buf.String() != want {
			t.Errorf("plain progress:\n%s\nwant:\n%s", buf.String(), want)
		}
	})
}
