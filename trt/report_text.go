package trt

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// WriteText writes the report for a terminal: every figure the log has,
// with trtexec's own numbers as it printed them. Sections come in the order
// a person reads a build: what ran, on what, how the build went, what was
// timed, what went wrong, and the verdict.
func (r *Report) WriteText(w io.Writer) error {
	t := &textReport{}
	t.header(r)
	t.device(r.Log.Device)
	t.build(r.Log)
	t.timing(r.Log)
	t.diagnostics(r.Log)
	t.verdict(r.Classification)
	_, err := io.WriteString(w, t.String())
	return err
}

// textReport accumulates the lines of WriteText: labelled lines in one
// column, indented blocks for lists.
type textReport struct{ strings.Builder }

// line writes "label:" padded to a column, then the value; an empty label
// continues the line above.
func (t *textReport) line(label, format string, args ...any) {
	if label != "" {
		label += ":"
	}
	fmt.Fprintf(t, "%-14s %s\n", label, fmt.Sprintf(format, args...))
}

// header: the file, the result line, the TensorRT version and where it was
// read, and the echoed command line.
func (t *textReport) header(r *Report) {
	l := r.Log
	if r.File != "" {
		t.line("log", "%s (%d lines)", r.File, l.Lines)
	}
	status := l.Status
	if status == "" {
		status = "no result line"
	}
	t.line("status", "%s (%s; stage %s)", status, r.Exit, r.Stage)
	if !l.Version.IsZero() {
		v := "TensorRT " + l.Version.String()
		var from []string
		if l.VersionCode != 0 {
			from = append(from, fmt.Sprintf("banner v%d", l.VersionCode))
		}
		if l.VersionLine != "" {
			from = append(from, fmt.Sprintf("%q", "TensorRT version: "+l.VersionLine))
		}
		if len(from) > 0 {
			v += " (" + strings.Join(from, ", ") + ")"
		}
		t.line("version", "%s", v)
	}
	if l.Command != "" {
		t.line("command", "%s", l.Command)
	}
}

// device: the selected GPU's properties on one line, then the other
// devices trtexec listed.
func (t *textReport) device(d *Device) {
	if d == nil {
		return
	}
	var parts []string
	add := func(cond bool, format string, args ...any) {
		if cond {
			parts = append(parts, fmt.Sprintf(format, args...))
		}
	}
	add(d.Name != "", "%s", d.Name)
	add(d.ID != nil, "device %d", deref(d.ID))
	add(d.ComputeCapability != "", "CC %s", d.ComputeCapability)
	add(d.SMs > 0, "%d SMs", d.SMs)
	add(d.GlobalMemoryMiB > 0, "%d MiB", d.GlobalMemoryMiB)
	add(d.SharedMemoryPerSMKiB > 0, "%d KiB shared/SM", d.SharedMemoryPerSMKiB)
	add(d.MemoryBusWidthBits > 0, "%d-bit bus", d.MemoryBusWidthBits)
	add(d.ECC != "", "ECC %s", d.ECC)
	add(d.ComputeClockGHz > 0 || d.MemoryClockGHz > 0, "clocks %s/%s GHz (application, not live)", num(d.ComputeClockGHz), num(d.MemoryClockGHz))
	add(d.UUID != "", "%s", d.UUID)
	t.line("device", "%s", strings.Join(parts, ", "))
	for _, a := range d.Available {
		t.line("", "available: device %d %q %s", a.Index, a.Name, a.UUID)
	}
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// build: the precision asked for and the build's milestones (parse, engine
// generation, sizes, memory, deserialization).
func (t *textReport) build(l *Log) {
	if p := l.Options["Build Options"]["Precision"]; p != "" {
		t.line("precision", "%s", p)
	}
	m := l.Milestones
	var ms []string
	add := func(cond bool, format string, args ...any) {
		if cond {
			ms = append(ms, fmt.Sprintf(format, args...))
		}
	}
	add(m.ParseTimeS > 0, "parsed in %s s", num(m.ParseTimeS))
	add(m.ParseFinished && m.ParseTimeS == 0, "parsed")
	add(m.EngineGenerationS > 0, "engine generation %s s", num(m.EngineGenerationS))
	add(m.EngineBuiltS > 0, "built in %s s", num(m.EngineBuiltS))
	add(m.EngineSizeMiB > 0, "engine %s MiB", num(m.EngineSizeMiB))
	add(m.ActivationMemoryBytes > 0, "activation memory %d bytes", m.ActivationMemoryBytes)
	add(m.WeightsMemoryBytes > 0, "weights memory %d bytes", m.WeightsMemoryBytes)
	add(m.PeakBuildCPUMiB > 0, "peak build CPU memory %s MiB", num(m.PeakBuildCPUMiB))
	add(m.LoadedEngineMiB > 0, "loaded engine %s MiB", num(m.LoadedEngineMiB))
	add(m.DeserializeS > 0, "deserialized in %s s", num(m.DeserializeS))
	add(m.ContextMemoryMiB > 0, "context memory %s MiB", num(m.ContextMemoryMiB))
	add(m.PlanVersion != "", "plan from TensorRT %s", m.PlanVersion)
	add(m.InferenceSkipped, "inference skipped")
	if len(ms) > 0 {
		t.line("milestones", "%s", strings.Join(ms, "; "))
	}
}

// timing: the bindings and random inputs of the timed run, warm-up and
// trace counts, the performance summary and the layer profile.
func (t *textReport) timing(l *Log) {
	for _, bd := range l.Bindings {
		dir := "output"
		if bd.Input {
			dir = "input"
		}
		typ := ""
		if bd.Type != "" {
			typ = " " + bd.Type
		}
		t.line("binding", "%s %s %s%s", dir, bd.Name, bd.Dimensions, typ)
	}
	for _, in := range l.RandomInputs {
		t.line("random input", "%s (no --loadInputs data)", in)
	}
	if l.Warmup != nil {
		t.line("warm-up", "%d queries over %s ms", l.Warmup.Queries, num(l.Warmup.Ms))
	}
	if l.Trace != nil {
		t.line("timed", "%d queries over %s s", l.Trace.Queries, num(l.Trace.Seconds))
	}
	if s := l.Summary; s != nil {
		t.summary(s)
	} else if l.SummaryOmitted {
		t.line("summary", "not printed: a profiler was attached to the timed run")
	}
	if p := l.Profile; p != nil {
		t.line("layer profile", "%d layers over %d iterations", len(p.Layers), p.Iterations)
		if p.Total != nil {
			t.line("", "total %s ms, average %s ms per iteration", num(p.Total.TotalMs), num(p.Total.AvgMs))
		}
	}
}

// summary: trtexec's performance summary, one distribution a line.
func (t *textReport) summary(s *Summary) {
	t.WriteString("performance summary:\n")
	fmt.Fprintf(t, "  %-24s %s qps\n", "Throughput", num(s.ThroughputQPS))
	for _, d := range s.Distributions() {
		fmt.Fprintf(t, "  %-24s min %s, max %s, mean %s, median %s", d.Name, num(d.MinMs), num(d.MaxMs), num(d.MeanMs), num(d.MedianMs))
		for _, p := range d.Percentiles {
			fmt.Fprintf(t, ", p%s %s", num(p.P), num(p.Ms))
		}
		t.WriteString(" ms\n")
	}
	fmt.Fprintf(t, "  %-24s %s s\n", "Total Host Walltime", num(s.TotalHostWalltimeS))
	fmt.Fprintf(t, "  %-24s %s s\n", "Total GPU Compute Time", num(s.TotalGPUComputeS))
}

// diagnostics: warnings with their kind and hint, then errors (multi-line
// errors indented under their first line).
func (t *textReport) diagnostics(l *Log) {
	if len(l.Warnings) > 0 {
		t.WriteString("warnings:\n")
		for _, wn := range l.Warnings {
			kind := ""
			if wn.Kind != "" {
				kind = "[" + wn.Kind + "] "
			}
			fmt.Fprintf(t, "  %s%s\n", kind, wn.Text)
			if wn.Hint != "" {
				fmt.Fprintf(t, "      %s\n", wn.Hint)
			}
		}
	}
	if len(l.Errors) > 0 {
		t.WriteString("errors:\n")
		for _, e := range l.Errors {
			for i, el := range strings.Split(e, "\n") {
				indent := "  "
				if i > 0 {
					indent = "    "
				}
				fmt.Fprintf(t, "%s%s\n", indent, el)
			}
		}
	}
}

// verdict: ok, or the failure's severity, class, kind, operator, reason and
// the log lines that show it.
func (t *textReport) verdict(c Classification) {
	if c.OK {
		t.line("result", "ok")
		return
	}
	what := "permanent"
	switch {
	case c.BrokenWorker:
		what = "broken worker"
	case c.Retryable:
		what = "retryable"
	}
	op := ""
	if c.Op != "" {
		op = ", operator " + c.Op
	}
	t.line("result", "%s %s failure (%s%s): %s", what, c.Class, c.Kind, op, c.Reason)
	for _, e := range c.Evidence {
		t.line("", "evidence: %s", e)
	}
}
