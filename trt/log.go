package trt

// Log is what a trtexec log says, as far as tunefleet needs it. Numbers are
// kept as trtexec printed them (C++ default formatting, up to six
// significant digits), in the units of the log: ms, s, MiB, GHz, bytes.
// Fields that the log does not contain stay zero or nil.
type Log struct {
	// Status is the final &&&& result: PASSED, FAILED or WAIVED; empty
	// when there is none (a crash, a kill, or one of the exit() paths of
	// 10.x that print no result line).
	Status string `json:"status,omitempty"`
	// Running: the "&&&& RUNNING" line was seen (trtexec got as far as
	// starting).
	Running bool `json:"running"`
	// Command is the command line as trtexec echoed it: argv joined by
	// single spaces, without quoting, so a path with a space in it cannot
	// be recovered from it.
	Command string `json:"command,omitempty"`
	// Version is from the banner ([TensorRT vNNNN] [bNN]), else from the
	// "TensorRT version:" line.
	Version     Version `json:"version"`
	VersionCode int     `json:"version_code,omitempty"` // the banner's NNNN
	VersionLine string  `json:"version_line,omitempty"` // "10.3.0" as printed
	// Options is the option echo: section ("Build Options", …) → key → value.
	Options    map[string]map[string]string `json:"options,omitempty"`
	Device     *Device                      `json:"device,omitempty"`
	Milestones Milestones                   `json:"milestones"`
	Bindings   []Binding                    `json:"bindings,omitempty"`
	// RandomInputs are inputs trtexec filled with random values because no
	// --loadInputs file named them.
	RandomInputs []string `json:"random_inputs,omitempty"`
	Warmup       *Warmup  `json:"warmup,omitempty"`
	Trace        *Trace   `json:"trace,omitempty"`
	Summary      *Summary `json:"summary,omitempty"`
	// SummaryOmitted: trtexec said it does not report e2e timing because a
	// profiler was attached (--dumpProfile/--exportProfile without
	// --separateProfileRun): a PASSED run with no benchmark result.
	SummaryOmitted bool          `json:"summary_omitted,omitempty"`
	Profile        *LayerProfile `json:"profile,omitempty"`
	Warnings       []Warning     `json:"warnings,omitempty"`
	// Errors are the [E] and [F] lines, each with the unprefixed lines that
	// continue it (ONNX node dumps), in order.
	Errors []string `json:"errors,omitempty"`
	// Fatal are INFO lines that announce a fatal condition: 10.x prints
	// "Cannot find any available devices (GPUs)!" to stdout before exit(1).
	Fatal []string `json:"fatal,omitempty"`
	// Unprefixed keeps the last unprefixed lines that continue nothing:
	// where fatal messages printed outside trtexec's logger end up ("Cuda
	// failure at …", the dynamic loader's "error while loading shared
	// libraries"), along with help text.
	Unprefixed []string `json:"unprefixed,omitempty"`
	Lines      int      `json:"lines"`
}

// Device is the "=== Device Information ===" block. 10.x adds the list of
// available devices and the selected device's ID and UUID (which match
// NVML's); 8.5 and older print "Compute Clock Rate"/"Memory Clock Rate"
// without "Application".
type Device struct {
	Name                 string            `json:"name,omitempty"`
	ID                   *int              `json:"id,omitempty"`
	UUID                 string            `json:"uuid,omitempty"`
	ComputeCapability    string            `json:"compute_capability,omitempty"`
	SMs                  int               `json:"sms,omitempty"`
	GlobalMemoryMiB      int64             `json:"global_memory_mib,omitempty"`
	SharedMemoryPerSMKiB int64             `json:"shared_memory_per_sm_kib,omitempty"`
	MemoryBusWidthBits   int               `json:"memory_bus_width_bits,omitempty"`
	ECC                  string            `json:"ecc,omitempty"` // "enabled"/"disabled"
	ComputeClockGHz      float64           `json:"compute_clock_ghz,omitempty"`
	MemoryClockGHz       float64           `json:"memory_clock_ghz,omitempty"`
	Available            []AvailableDevice `json:"available,omitempty"`
}

// AvailableDevice is one "Device N: "name" UUID: GPU-…" line (10.x).
type AvailableDevice struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	UUID  string `json:"uuid,omitempty"`
}

// Milestones are the build and load landmarks (trtexec-nvml.md §2.5).
type Milestones struct {
	ParseFinished         bool    `json:"parse_finished,omitempty"`
	ParseTimeS            float64 `json:"parse_time_s,omitempty"`
	EngineGenerationS     float64 `json:"engine_generation_s,omitempty"` // TensorRT's own figure
	EngineBuiltS          float64 `json:"engine_built_s,omitempty"`      // trtexec's, around it
	EngineSizeMiB         float64 `json:"engine_size_mib,omitempty"`
	LoadedEngineMiB       float64 `json:"loaded_engine_mib,omitempty"`
	DeserializeS          float64 `json:"deserialize_s,omitempty"`
	ContextMemoryMiB      float64 `json:"context_memory_mib,omitempty"`
	ActivationMemoryBytes int64   `json:"activation_memory_bytes,omitempty"`
	WeightsMemoryBytes    int64   `json:"weights_memory_bytes,omitempty"`
	PeakBuildCPUMiB       float64 `json:"peak_build_cpu_mib,omitempty"`
	PlanVersion           string  `json:"plan_version,omitempty"`
	InferenceStarted      bool    `json:"inference_started,omitempty"`
	InferenceSkipped      bool    `json:"inference_skipped,omitempty"`
}

// Binding is an input or output binding trtexec created for inference.
type Binding struct {
	Input      bool   `json:"input"`
	Name       string `json:"name"`
	Dimensions string `json:"dimensions"`
	Type       string `json:"type,omitempty"` // "fp32", … (10.x)
}

// Warmup is "Warmup completed N queries over X ms".
type Warmup struct {
	Queries int     `json:"queries"`
	Ms      float64 `json:"ms"`
}

// Trace is "Timing trace has N queries over X s".
type Trace struct {
	Queries int     `json:"queries"`
	Seconds float64 `json:"seconds"`
}

// Summary is the "=== Performance summary ===" block with every line it
// has. Throughput counts queries (one enqueue of the whole input), not
// samples: multiply by the batch size for samples per second.
type Summary struct {
	ThroughputQPS float64       `json:"throughput_qps"`
	Latency       *Distribution `json:"latency,omitempty"`
	EndToEnd      *Distribution `json:"end_to_end_host_latency,omitempty"` // 8.0-8.2 only
	Enqueue       *Distribution `json:"enqueue_time,omitempty"`
	H2D           *Distribution `json:"h2d_latency,omitempty"`
	GPUCompute    *Distribution `json:"gpu_compute_time,omitempty"`
	D2H           *Distribution `json:"d2h_latency,omitempty"`
	// Other holds distribution lines of names not listed above.
	Other              []Distribution `json:"other,omitempty"`
	TotalHostWalltimeS float64        `json:"total_host_walltime_s"`
	TotalGPUComputeS   float64        `json:"total_gpu_compute_s"`
}

// Distributions returns the summary's distributions in print order.
func (s *Summary) Distributions() []Distribution {
	var out []Distribution
	for _, d := range []*Distribution{s.Latency, s.EndToEnd, s.Enqueue, s.H2D, s.GPUCompute, s.D2H} {
		if d != nil {
			out = append(out, *d)
		}
	}
	return append(out, s.Other...)
}

// Distribution is one "Name: min = … ms, max = …, mean = …, median = …,
// percentile(P%) = … ms" line.
type Distribution struct {
	Name        string       `json:"name"`
	MinMs       float64      `json:"min_ms"`
	MaxMs       float64      `json:"max_ms"`
	MeanMs      float64      `json:"mean_ms"`
	MedianMs    float64      `json:"median_ms"`
	Percentiles []Percentile `json:"percentiles,omitempty"`
}

// Percentile is one "percentile(P%) = V ms" item.
type Percentile struct {
	P  float64 `json:"p"`
	Ms float64 `json:"ms"`
}

// Percentile returns the value printed for percentile p.
func (d Distribution) Percentile(p float64) (float64, bool) {
	for _, x := range d.Percentiles {
		if x.P == p {
			return x.Ms, true
		}
	}
	return 0, false
}

// LayerProfile is the per-layer table of --dumpProfile.
type LayerProfile struct {
	Iterations int         `json:"iterations"`
	Layers     []LayerTime `json:"layers"`
	Total      *LayerTime  `json:"total,omitempty"`
}

// LayerTime is one row of the per-layer table.
type LayerTime struct {
	Name     string  `json:"name"`
	TotalMs  float64 `json:"total_ms"`
	AvgMs    float64 `json:"avg_ms"`
	MedianMs float64 `json:"median_ms,omitempty"` // 8.4+
	Percent  float64 `json:"percent"`
}

// Warning is one [W] line with the indented hint line that follows it.
type Warning struct {
	Kind  string  `json:"kind,omitempty"`
	Text  string  `json:"text"`
	Hint  string  `json:"hint,omitempty"`
	Value float64 `json:"value,omitempty"` // the coefficient of variance, in %, for WarnUnstable
}

// Warning kinds the parser recognises (trtexec-nvml.md §2.8); other
// warnings have an empty kind.
const (
	WarnUnstable        = "gpu-compute-unstable"
	WarnEnqueueBound    = "enqueue-bound"
	WarnH2DBound        = "h2d-bound"
	WarnD2HBound        = "d2h-bound"
	WarnMultiStream     = "multiple-streams"
	WarnCUDAGraph       = "cuda-graph-ignored"
	WarnWeakTyping      = "weak-typing-deprecated"
	WarnDeprecatedFlag  = "deprecated-flag"
	WarnShapeOverride   = "shape-auto-override"
	WarnMemory          = "memory"
	WarnAuxStreams      = "aux-streams"
	WarnTimingCacheRead = "timing-cache-unreadable"
)

// Unstable returns the coefficient of variance of the GPU compute time
// trtexec warned about, in percent.
func (l *Log) Unstable() (float64, bool) {
	for _, w := range l.Warnings {
		if w.Kind == WarnUnstable {
			return w.Value, true
		}
	}
	return 0, false
}

// HasWarning reports whether a warning of the kind was printed.
func (l *Log) HasWarning(kind string) bool {
	for _, w := range l.Warnings {
		if w.Kind == kind {
			return true
		}
	}
	return false
}
