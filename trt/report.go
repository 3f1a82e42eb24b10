package trt

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Report is what the parser and classifier make of one trtexec log, for
// people debugging a build (`worker trt-log FILE [-o json]`).
type Report struct {
	File           string         `json:"file,omitempty"`
	Stage          Stage          `json:"stage"`
	Exit           ExitStatus     `json:"exit"`
	Log            *Log           `json:"log"`
	Classification Classification `json:"classification"`
}

// Describe parses a log and classifies it. With st.Unknown the exit status
// is inferred from the result line (PASSED 0, FAILED 1); with StageAuto the
// stage is inferred from the echoed command line.
func Describe(r io.Reader, st ExitStatus, stage Stage) (*Report, error) {
	l, err := Parse(r)
	if err != nil {
		return nil, err
	}
	if st.Unknown {
		st = InferExit(l)
	}
	if stage == StageAuto {
		stage = InferStage(l)
	}
	return &Report{Stage: stage, Exit: st, Log: l, Classification: Classify(l, st, stage)}, nil
}

// DescribeFile is Describe for a file whose exit status and stage are
// unknown: what `worker trt-log FILE` needs.
func DescribeFile(path string) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := Describe(f, ExitStatus{Code: -1, Unknown: true}, StageAuto)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.File = path
	return r, nil
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// WriteText writes the report for a terminal: every figure the log has,
// with trtexec's own numbers as it printed them.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	l := r.Log
	line := func(label, format string, args ...any) {
		if label != "" {
			label += ":"
		}
		fmt.Fprintf(&b, "%-14s %s\n", label, fmt.Sprintf(format, args...))
	}
	if r.File != "" {
		line("log", "%s (%d lines)", r.File, l.Lines)
	}
	status := l.Status
	if status == "" {
		status = "no result line"
	}
	line("status", "%s (%s; stage %s)", status, r.Exit, r.Stage)
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
		line("version", "%s", v)
	}
	if l.Command != "" {
		line("command", "%s", l.Command)
	}
	if d := l.Device; d != nil {
		var parts []string
		if d.Name != "" {
			parts = append(parts, d.Name)
		}
		if d.ID != nil {
			parts = append(parts, fmt.Sprintf("device %d", *d.ID))
		}
		if d.ComputeCapability != "" {
			parts = append(parts, "CC "+d.ComputeCapability)
		}
		if d.SMs > 0 {
			parts = append(parts, fmt.Sprintf("%d SMs", d.SMs))
		}
		if d.GlobalMemoryMiB > 0 {
			parts = append(parts, fmt.Sprintf("%d MiB", d.GlobalMemoryMiB))
		}
		if d.SharedMemoryPerSMKiB > 0 {
			parts = append(parts, fmt.Sprintf("%d KiB shared/SM", d.SharedMemoryPerSMKiB))
		}
		if d.MemoryBusWidthBits > 0 {
			parts = append(parts, fmt.Sprintf("%d-bit bus", d.MemoryBusWidthBits))
		}
		if d.ECC != "" {
			parts = append(parts, "ECC "+d.ECC)
		}
		if d.ComputeClockGHz > 0 || d.MemoryClockGHz > 0 {
			parts = append(parts, fmt.Sprintf("clocks %s/%s GHz (application, not live)", num(d.ComputeClockGHz), num(d.MemoryClockGHz)))
		}
		if d.UUID != "" {
			parts = append(parts, d.UUID)
		}
		line("device", "%s", strings.Join(parts, ", "))
		for _, a := range d.Available {
			line("", "available: device %d %q %s", a.Index, a.Name, a.UUID)
		}
	}
	if p := l.Options["Build Options"]["Precision"]; p != "" {
		line("precision", "%s", p)
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
		line("milestones", "%s", strings.Join(ms, "; "))
	}
	for _, bd := range l.Bindings {
		dir := "output"
		if bd.Input {
			dir = "input"
		}
		t := ""
		if bd.Type != "" {
			t = " " + bd.Type
		}
		line("binding", "%s %s %s%s", dir, bd.Name, bd.Dimensions, t)
	}
	for _, in := range l.RandomInputs {
		line("random input", "%s (no --loadInputs data)", in)
	}
	if l.Warmup != nil {
		line("warm-up", "%d queries over %s ms", l.Warmup.Queries, num(l.Warmup.Ms))
	}
	if l.Trace != nil {
		line("timed", "%d queries over %s s", l.Trace.Queries, num(l.Trace.Seconds))
	}
	if s := l.Summary; s != nil {
		b.WriteString("performance summary:\n")
		fmt.Fprintf(&b, "  %-24s %s qps\n", "Throughput", num(s.ThroughputQPS))
		for _, d := range s.Distributions() {
			fmt.Fprintf(&b, "  %-24s min %s, max %s, mean %s, median %s", d.Name, num(d.MinMs), num(d.MaxMs), num(d.MeanMs), num(d.MedianMs))
			for _, p := range d.Percentiles {
				fmt.Fprintf(&b, ", p%s %s", num(p.P), num(p.Ms))
			}
			b.WriteString(" ms\n")
		}
		fmt.Fprintf(&b, "  %-24s %s s\n", "Total Host Walltime", num(s.TotalHostWalltimeS))
		fmt.Fprintf(&b, "  %-24s %s s\n", "Total GPU Compute Time", num(s.TotalGPUComputeS))
	} else if l.SummaryOmitted {
		line("summary", "not printed: a profiler was attached to the timed run")
	}
	if p := l.Profile; p != nil {
		line("layer profile", "%d layers over %d iterations", len(p.Layers), p.Iterations)
		if p.Total != nil {
			line("", "total %s ms, average %s ms per iteration", num(p.Total.TotalMs), num(p.Total.AvgMs))
		}
	}
	if len(l.Warnings) > 0 {
		b.WriteString("warnings:\n")
		for _, wn := range l.Warnings {
			kind := ""
			if wn.Kind != "" {
				kind = "[" + wn.Kind + "] "
			}
			fmt.Fprintf(&b, "  %s%s\n", kind, wn.Text)
			if wn.Hint != "" {
				fmt.Fprintf(&b, "      %s\n", wn.Hint)
			}
		}
	}
	if len(l.Errors) > 0 {
		b.WriteString("errors:\n")
		for _, e := range l.Errors {
			for i, el := range strings.Split(e, "\n") {
				if i == 0 {
					fmt.Fprintf(&b, "  %s\n", el)
				} else {
					fmt.Fprintf(&b, "    %s\n", el)
				}
			}
		}
	}
	c := r.Classification
	if c.OK {
		line("result", "ok")
	} else {
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
		line("result", "%s %s failure (%s%s): %s", what, c.Class, c.Kind, op, c.Reason)
		for _, e := range c.Evidence {
			line("", "evidence: %s", e)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
