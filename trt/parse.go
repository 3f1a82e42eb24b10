package trt

import (
	"bufio"
	"io"
	"math"
	"strconv"
	"strings"
)

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

// Limits that keep a hostile or broken log from exhausting memory.
const (
	maxLineBytes   = 1 << 20
	maxEntryBytes  = 16 << 10
	maxErrors      = 500
	maxWarnings    = 2000
	maxUnprefixed  = 64
	maxLayerRows   = 100000
	maxOptionPairs = 2000
	maxBindings    = 10000
)

type section int

const (
	secNone section = iota
	secOptions
	secDevice
	secSummary
	secProfile
	secOther
)

type parser struct {
	l        *Log
	sec      section
	secName  string
	lastSev  byte // severity of the last prefixed line
	lastWarn int  // index of the last warning, -1 if the last line was not one
	pairs    int
}

// Parse reads a trtexec log (stdout and stderr, merged or not). It never
// fails on content, only when r fails, and never panics: anything it does
// not recognise is skipped.
func Parse(r io.Reader) (*Log, error) {
	p := &parser{l: &Log{}, lastWarn: -1}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if len(line) > 0 || err == nil {
			p.line(line)
		}
		if err == io.EOF {
			return p.l, nil
		}
		if err != nil {
			return p.l, err
		}
	}
}

// readLine returns the next line without its end, cut at maxLineBytes.
func readLine(br *bufio.Reader) (string, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) <= maxLineBytes {
			buf = append(buf, frag...)
		} else if len(buf) < maxLineBytes {
			buf = append(buf, frag[:maxLineBytes-len(buf)]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(buf) == 0 {
			return "", io.EOF
		}
		return strings.TrimRight(string(buf), "\r\n"), err
	}
}

// splitPrefix splits "[08/09/2024-23:19:08] [I] [TRT] text" into severity,
// whether the message came from the TensorRT library, and text. ok is false
// for a line without the prefix.
func splitPrefix(line string) (sev byte, trt bool, text string, ok bool) {
	// [MM/DD/YYYY-HH:MM:SS] is 21 bytes, then " [S]".
	if len(line) < 25 || line[0] != '[' || line[20] != ']' || line[21] != ' ' || line[22] != '[' || line[24] != ']' {
		return 0, false, "", false
	}
	for i := 1; i < 20; i++ {
		c := line[i]
		switch i {
		case 3, 6:
			if c != '/' {
				return 0, false, "", false
			}
		case 11:
			if c != '-' {
				return 0, false, "", false
			}
		case 14, 17:
			if c != ':' {
				return 0, false, "", false
			}
		default:
			if c < '0' || c > '9' {
				return 0, false, "", false
			}
		}
	}
	sev = line[23]
	if !strings.ContainsRune("IVWEF", rune(sev)) {
		return 0, false, "", false
	}
	text = line[25:]
	if strings.HasPrefix(text, " ") {
		text = text[1:]
	}
	if strings.HasPrefix(text, "[TRT] ") {
		trt, text = true, text[len("[TRT] "):]
	} else if text == "[TRT]" {
		trt, text = true, ""
	}
	return sev, trt, text, true
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func (p *parser) line(raw string) {
	l := p.l
	l.Lines++
	if strings.HasPrefix(raw, "&&&& ") {
		p.result(raw)
		p.lastWarn = -1
		return
	}
	sev, _, text, ok := splitPrefix(raw)
	if !ok {
		p.unprefixed(raw)
		return
	}
	p.lastSev = sev
	switch sev {
	case 'W':
		p.warning(text)
		return
	case 'E', 'F':
		p.lastWarn = -1
		if len(l.Errors) < maxErrors {
			l.Errors = append(l.Errors, clip(text, maxEntryBytes))
		}
		return
	}
	p.lastWarn = -1
	p.info(text)
}

// result reads an "&&&& STATUS TensorRT.trtexec [TensorRT vNNNN] [bNN] # cmd" line.
func (p *parser) result(raw string) {
	l := p.l
	rest := raw[len("&&&& "):]
	word, _, _ := strings.Cut(rest, " ")
	switch word {
	case "RUNNING":
		l.Running = true
	case "PASSED", "FAILED", "WAIVED":
		l.Status = word
	default:
		return
	}
	if code, build, ok := parseBannerLine(raw); ok {
		if v, err := DecodeVersionCode(code); err == nil {
			v.Build = build
			if l.VersionCode == 0 || l.Version.Build == 0 {
				l.Version, l.VersionCode = v, code
			}
		}
	}
	if _, cmd, ok := strings.Cut(raw, " # "); ok && (l.Command == "" || word == "RUNNING") {
		l.Command = clip(cmd, maxEntryBytes)
	}
}

func (p *parser) unprefixed(raw string) {
	l := p.l
	// Continuation lines of a multi-line error (node dumps) belong to it.
	if (p.lastSev == 'E' || p.lastSev == 'F') && len(l.Errors) > 0 {
		last := &l.Errors[len(l.Errors)-1]
		if len(*last)+1+len(raw) <= maxEntryBytes {
			*last += "\n" + raw
		}
		return
	}
	if strings.TrimSpace(raw) == "" {
		return
	}
	l.Unprefixed = append(l.Unprefixed, clip(raw, maxEntryBytes))
	if len(l.Unprefixed) > maxUnprefixed {
		l.Unprefixed = append(l.Unprefixed[:0], l.Unprefixed[len(l.Unprefixed)-maxUnprefixed:]...)
	}
}

func (p *parser) warning(text string) {
	l := p.l
	// The second line of trtexec's two-line warnings is indented by two
	// spaces ("  If not already in use, …").
	if strings.HasPrefix(text, "  ") && p.lastWarn >= 0 && p.lastWarn < len(l.Warnings) {
		w := &l.Warnings[p.lastWarn]
		if w.Hint == "" {
			w.Hint = clip(strings.TrimSpace(text), maxEntryBytes)
			return
		}
	}
	if len(l.Warnings) >= maxWarnings {
		p.lastWarn = -1
		return
	}
	w := Warning{Text: clip(text, maxEntryBytes)}
	t := text
	switch {
	case strings.Contains(t, "GPU compute time is unstable"):
		w.Kind = WarnUnstable
		if i := strings.Index(t, "coefficient of variance = "); i >= 0 {
			if v, ok := leadingFloat(t[i+len("coefficient of variance = "):]); ok {
				w.Value = v
			}
		}
	case strings.Contains(t, "Throughput may be bound by Enqueue Time"):
		w.Kind = WarnEnqueueBound
	case strings.Contains(t, "Throughput may be bound by host-to-device"):
		w.Kind = WarnH2DBound
	case strings.Contains(t, "Throughput may be bound by device-to-host"):
		w.Kind = WarnD2HBound
	case strings.Contains(t, "Multiple inference streams are used"):
		w.Kind = WarnMultiStream
	case strings.Contains(t, "--useCudaGraph flag has been ignored"), strings.Contains(t, "not permitted under CUDA graph capture"):
		w.Kind = WarnCUDAGraph
	case strings.Contains(t, "Weakly-typed networks have been deprecated"):
		w.Kind = WarnWeakTyping
	case strings.Contains(t, "has been deprecated"):
		w.Kind = WarnDeprecatedFlag
	case strings.Contains(t, "Dynamic dimensions required for input"), strings.Contains(t, "Shape missing for input with dynamic shape"):
		w.Kind = WarnShapeOverride
	case strings.Contains(t, "could not be allocated"), strings.Contains(t, "insufficient memory"):
		w.Kind = WarnMemory
	case strings.Contains(t, "auxiliary streams"):
		w.Kind = WarnAuxStreams
	case strings.Contains(t, "Could not read cache from"), strings.Contains(t, "Could not read timing cache from"):
		w.Kind = WarnTimingCacheRead
	}
	l.Warnings = append(l.Warnings, w)
	p.lastWarn = len(l.Warnings) - 1
}

// info handles an [I] or [V] line.
func (p *parser) info(text string) {
	l := p.l
	trim := strings.TrimSpace(text)
	// Printed at INFO inside the device block, right before exit(1).
	if strings.HasPrefix(trim, "Cannot find any available devices") || strings.HasPrefix(trim, "Cannot find device ID") {
		if len(l.Fatal) < maxErrors {
			l.Fatal = append(l.Fatal, clip(trim, maxEntryBytes))
		}
		return
	}
	if strings.HasPrefix(trim, "=== ") && strings.HasSuffix(trim, " ===") && len(trim) >= 8 {
		p.header(trim[4 : len(trim)-4])
		return
	}
	switch p.sec {
	case secOptions:
		if trim == "" {
			p.sec = secNone
			return
		}
		if k, v, ok := strings.Cut(trim, ":"); ok && p.pairs < maxOptionPairs {
			if l.Options == nil {
				l.Options = map[string]map[string]string{}
			}
			m := l.Options[p.secName]
			if m == nil {
				m = map[string]string{}
				l.Options[p.secName] = m
			}
			m[strings.TrimSpace(k)] = clip(strings.TrimSpace(v), maxEntryBytes)
			p.pairs++
		}
		return
	case secDevice:
		if strings.HasPrefix(trim, "TensorRT version:") {
			p.sec = secNone
			break // handled below
		}
		p.device(text, trim)
		return
	case secSummary:
		if trim == "" {
			p.sec = secNone
			return
		}
		if p.summary(trim) {
			return
		}
	case secProfile:
		if trim == "" {
			p.sec = secNone
			return
		}
		p.profileRow(trim)
		return
	}
	p.milestone(trim)
}

func (p *parser) header(name string) {
	l := p.l
	p.secName = name
	switch {
	case strings.HasSuffix(name, " Options"):
		p.sec = secOptions
	case name == "Device Information":
		p.sec = secDevice
		if l.Device == nil {
			l.Device = &Device{}
		}
	case name == "Performance summary":
		p.sec = secSummary
		if l.Summary == nil {
			l.Summary = &Summary{}
		}
	case strings.HasPrefix(name, "Profile ("):
		p.sec = secProfile
		prof := &LayerProfile{}
		if n, ok := leadingInt(strings.TrimPrefix(name, "Profile (")); ok {
			prof.Iterations = n
		}
		l.Profile = prof
	default:
		p.sec = secOther
	}
}

func (p *parser) device(text, trim string) {
	d := p.l.Device
	if d == nil {
		return
	}
	// "  Device 0: "NVIDIA RTX A5000" UUID: GPU-…" under "Available Devices:".
	if strings.HasPrefix(trim, "Device ") {
		rest := trim[len("Device "):]
		idx, ok := leadingInt(rest)
		if q1 := strings.IndexByte(rest, '"'); ok && q1 >= 0 {
			if q2 := strings.IndexByte(rest[q1+1:], '"'); q2 >= 0 {
				ad := AvailableDevice{Index: idx, Name: rest[q1+1 : q1+1+q2]}
				if _, uuid, ok := strings.Cut(rest[q1+1+q2:], "UUID: "); ok {
					ad.UUID = strings.TrimSpace(uuid)
				}
				if len(d.Available) < 256 {
					d.Available = append(d.Available, ad)
				}
				return
			}
		}
	}
	k, v, ok := strings.Cut(trim, ":")
	if !ok {
		return
	}
	v = strings.TrimSpace(v)
	switch strings.TrimSpace(k) {
	case "Selected Device":
		d.Name = v
	case "Selected Device ID":
		if n, err := strconv.Atoi(v); err == nil {
			d.ID = &n
		}
	case "Selected Device UUID":
		d.UUID = v
	case "Compute Capability":
		d.ComputeCapability = v
	case "SMs":
		d.SMs, _ = leadingInt(v)
	case "Device Global Memory":
		n, _ := leadingInt(v)
		d.GlobalMemoryMiB = int64(n)
	case "Shared Memory per SM":
		n, _ := leadingInt(v)
		d.SharedMemoryPerSMKiB = int64(n)
	case "Memory Bus Width":
		d.MemoryBusWidthBits, _ = leadingInt(v)
		switch {
		case strings.Contains(v, "ECC disabled"):
			d.ECC = "disabled"
		case strings.Contains(v, "ECC enabled"):
			d.ECC = "enabled"
		}
	case "Application Compute Clock Rate", "Compute Clock Rate":
		d.ComputeClockGHz, _ = leadingFloat(v)
	case "Application Memory Clock Rate", "Memory Clock Rate":
		d.MemoryClockGHz, _ = leadingFloat(v)
	}
}

// summary handles a line of the performance summary; false when the line
// is not one of its figures.
func (p *parser) summary(trim string) bool {
	s := p.l.Summary
	if s == nil {
		return false
	}
	name, rest, ok := strings.Cut(trim, ": ")
	if !ok {
		return false
	}
	switch name {
	case "Throughput":
		if v, ok := leadingFloat(rest); ok {
			s.ThroughputQPS = v
		}
		return true
	case "Total Host Walltime":
		if v, ok := leadingFloat(rest); ok {
			s.TotalHostWalltimeS = v
		}
		return true
	case "Total GPU Compute Time":
		if v, ok := leadingFloat(rest); ok {
			s.TotalGPUComputeS = v
		}
		return true
	}
	if !strings.HasPrefix(rest, "min = ") {
		return false
	}
	d := parseDistribution(name, rest)
	switch name {
	case "Latency":
		s.Latency = &d
	case "End-to-End Host Latency":
		s.EndToEnd = &d
	case "Enqueue Time":
		s.Enqueue = &d
	case "H2D Latency":
		s.H2D = &d
	case "GPU Compute Time":
		s.GPUCompute = &d
	case "D2H Latency":
		s.D2H = &d
	default:
		if len(s.Other) < 64 {
			s.Other = append(s.Other, d)
		}
	}
	return true
}

// parseDistribution reads "min = 1.2 ms, max = …, percentile(99%) = … ms".
func parseDistribution(name, rest string) Distribution {
	d := Distribution{Name: name}
	for _, item := range strings.Split(rest, ", ") {
		k, v, ok := strings.Cut(item, " = ")
		if !ok {
			continue
		}
		x, ok := leadingFloat(v)
		if !ok {
			continue
		}
		switch {
		case k == "min":
			d.MinMs = x
		case k == "max":
			d.MaxMs = x
		case k == "mean":
			d.MeanMs = x
		case k == "median":
			d.MedianMs = x
		case strings.HasPrefix(k, "percentile(") && strings.HasSuffix(k, "%)"):
			if pv, ok := leadingFloat(k[len("percentile(") : len(k)-2]); ok && len(d.Percentiles) < 100 {
				d.Percentiles = append(d.Percentiles, Percentile{P: pv, Ms: x})
			}
		}
	}
	return d
}

// profileRow reads one row of the --dumpProfile table: four numeric
// columns (three before 8.4, without the median) and the layer name, which
// may contain spaces.
func (p *parser) profileRow(trim string) {
	prof := p.l.Profile
	if prof == nil || strings.HasPrefix(trim, "Time(ms)") || len(prof.Layers) >= maxLayerRows {
		return
	}
	var nums []float64
	rest := trim
	for len(nums) < 4 {
		tok, after, _ := strings.Cut(rest, " ")
		v, err := strconv.ParseFloat(tok, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			break
		}
		nums = append(nums, v)
		rest = strings.TrimLeft(after, " ")
	}
	if len(nums) < 3 || rest == "" {
		return
	}
	row := LayerTime{Name: rest, TotalMs: nums[0], AvgMs: nums[1]}
	if len(nums) == 4 {
		row.MedianMs, row.Percent = nums[2], nums[3]
	} else {
		row.Percent = nums[2]
	}
	if rest == "Total" {
		prof.Total = &row
		return
	}
	prof.Layers = append(prof.Layers, row)
}

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

// leadingFloat parses the number at the start of s (C++ default stream
// formatting: "5.1947", "1e-05", "inf", "nan").
func leadingFloat(s string) (float64, bool) {
	s = strings.TrimLeft(s, " ")
	n := 0
	// A printed double is at most ~25 characters; the bound keeps the
	// shrinking search below cheap on garbage.
	for n < len(s) && n < 40 && strings.IndexByte("+-0123456789.eEinfatyINFATY", s[n]) >= 0 {
		n++
	}
	for n > 0 {
		if v, err := strconv.ParseFloat(s[:n], 64); err == nil {
			// Non-finite figures are not kept: they would make the JSON
			// report unwritable and mean nothing as measurements.
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, false
			}
			return v, true
		}
		n--
	}
	return 0, false
}

func leadingInt64(s string) (int64, bool) {
	s = strings.TrimLeft(s, " ")
	n := 0
	for n < len(s) && (s[n] >= '0' && s[n] <= '9' || n == 0 && s[n] == '-') {
		n++
	}
	v, err := strconv.ParseInt(s[:n], 10, 64)
	return v, err == nil
}

func leadingInt(s string) (int, bool) {
	v, ok := leadingInt64(s)
	if !ok || v != int64(int(v)) {
		return 0, false
	}
	return int(v), true
}
