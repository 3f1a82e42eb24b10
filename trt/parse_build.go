package trt

import (
	"strings"
)

// The build and load milestones (trtexec-nvml.md §2.5) and the bindings
// trtexec created for inference.

// milestone handles [I]/[V] lines outside the structured blocks.
func (p *parser) milestone(t string) {
	l := p.l
	m := &l.Milestones
	after := func(prefix string) (string, bool) {
		if i := strings.Index(t, prefix); i >= 0 {
			return t[i+len(prefix):], true
		}
		return "", false
	}
	switch {
	case strings.HasPrefix(t, "TensorRT version: "):
		v := strings.TrimSpace(t[len("TensorRT version: "):])
		l.VersionLine = clip(v, 64)
		if l.VersionCode == 0 {
			if pv, ok := parseVersionText(v); ok {
				l.Version = pv
			}
		}
	case strings.HasPrefix(t, "Finished parsing network model") || strings.HasPrefix(t, "Finish parsing network model"):
		m.ParseFinished = true
		if s, ok := after("Parse time: "); ok {
			m.ParseTimeS, _ = leadingFloat(s)
		}
	case strings.HasPrefix(t, "Engine generation completed in "):
		m.EngineGenerationS, _ = leadingFloat(t[len("Engine generation completed in "):])
	case strings.HasPrefix(t, "Engine built in "):
		m.EngineBuiltS, _ = leadingFloat(t[len("Engine built in "):])
	case strings.HasPrefix(t, "Created engine with size: "):
		m.EngineSizeMiB, _ = leadingFloat(t[len("Created engine with size: "):])
	case strings.HasPrefix(t, "Loaded engine size: "):
		m.LoadedEngineMiB, _ = leadingFloat(t[len("Loaded engine size: "):])
	case strings.HasPrefix(t, "Engine deserialized in "):
		m.DeserializeS, _ = leadingFloat(t[len("Engine deserialized in "):])
	case strings.HasPrefix(t, "Created execution context with device memory size: "):
		m.ContextMemoryMiB, _ = leadingFloat(t[len("Created execution context with device memory size: "):])
	case strings.HasPrefix(t, "Total Activation Memory: "):
		n, _ := leadingInt64(t[len("Total Activation Memory: "):])
		m.ActivationMemoryBytes = n
	case strings.HasPrefix(t, "Total Weights Memory: "):
		n, _ := leadingInt64(t[len("Total Weights Memory: "):])
		m.WeightsMemoryBytes = n
	case strings.Contains(t, "Peak memory usage during Engine building and serialization: CPU: "):
		s, _ := after("Peak memory usage during Engine building and serialization: CPU: ")
		m.PeakBuildCPUMiB, _ = leadingFloat(s)
	case strings.HasPrefix(t, "Plan was created with TensorRT version "):
		m.PlanVersion = clip(strings.TrimSpace(t[len("Plan was created with TensorRT version "):]), 64)
	case t == "Starting inference":
		m.InferenceStarted = true
	case strings.HasPrefix(t, "Skipped inference phase"):
		m.InferenceSkipped = true
	case strings.HasPrefix(t, "Warmup completed "):
		rest := t[len("Warmup completed "):]
		if n, ok := leadingInt(rest); ok {
			w := &Warmup{Queries: n}
			if s, ok := after(" queries over "); ok {
				w.Ms, _ = leadingFloat(s)
			}
			l.Warmup = w
		}
	case strings.HasPrefix(t, "Timing trace has "):
		rest := t[len("Timing trace has "):]
		if n, ok := leadingInt(rest); ok {
			tr := &Trace{Queries: n}
			if s, ok := after(" queries over "); ok {
				tr.Seconds, _ = leadingFloat(s)
			}
			l.Trace = tr
		}
	case strings.HasPrefix(t, "The e2e network timing is not reported"):
		l.SummaryOmitted = true
	case strings.HasPrefix(t, "Using random values for input "):
		if len(l.RandomInputs) < maxBindings {
			l.RandomInputs = append(l.RandomInputs, clip(t[len("Using random values for input "):], maxEntryBytes))
		}
	default:
		p.binding(t)
	}
}

// binding reads the binding lines of 10.x ("Input binding for x with
// dimensions 1x1x28x28 and type fp32 is created.", 10.3 without the type)
// and 8.6 ("Created input binding for input with dimensions 8x3x224x224").
func (p *parser) binding(t string) {
	l := p.l
	if len(l.Bindings) >= maxBindings {
		return
	}
	var b Binding
	var rest string
	switch {
	case strings.HasPrefix(t, "Input binding for "):
		b.Input, rest = true, t[len("Input binding for "):]
	case strings.HasPrefix(t, "Output binding for "):
		rest = t[len("Output binding for "):]
	case strings.HasPrefix(t, "Created input binding for "):
		b.Input, rest = true, t[len("Created input binding for "):]
	case strings.HasPrefix(t, "Created output binding for "):
		rest = t[len("Created output binding for "):]
	default:
		return
	}
	i := strings.LastIndex(rest, " with dimensions ")
	if i < 0 {
		return
	}
	b.Name = clip(rest[:i], maxEntryBytes)
	dims := rest[i+len(" with dimensions "):]
	dims = strings.TrimSuffix(dims, " is created.")
	if d, typ, ok := strings.Cut(dims, " and type "); ok {
		dims, b.Type = d, typ
	}
	b.Dimensions = clip(dims, 256)
	l.Bindings = append(l.Bindings, b)
}
