package gpu

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Info is what a worker says about itself (`worker info`): its platform
// key, class and queues with the fingerprint they come from.
type Info struct {
	Platform string `json:"platform"`
	// Platforms lists every platform key when the GPUs differ.
	Platforms   []string    `json:"platforms,omitempty"`
	Class       string      `json:"class"`
	Queues      []string    `json:"queues"`
	Fingerprint Fingerprint `json:"fingerprint"`
	// Telemetry holds one snapshot per GPU when the caller took them
	// (Snapshot).
	Telemetry []Report `json:"telemetry,omitempty"`
}

// NewInfo describes a worker with fingerprint fp serving Queues(fp, queues).
func NewInfo(fp Fingerprint, queues []string) Info {
	in := Info{
		Platform:    fp.PlatformKey(),
		Class:       fp.Class(),
		Queues:      Queues(fp, queues),
		Fingerprint: fp,
	}
	if !fp.Homogeneous() {
		in.Platforms = fp.Keys()
	}
	return in
}

// Text is the human form of Info.
func (in Info) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "platform:  %s\n", in.Platform)
	for _, k := range in.Platforms {
		fmt.Fprintf(&b, "           %s\n", k)
	}
	fmt.Fprintf(&b, "class:     %s\n", in.Class)
	fmt.Fprintf(&b, "queues:    %s\n", strings.Join(in.Queues, ", "))
	b.WriteString(in.Fingerprint.Text())
	for _, r := range in.Telemetry {
		b.WriteString(r.Text())
	}
	return b.String()
}

// Text is the human form of the fingerprint, one "name: value" per line.
func (f Fingerprint) Text() string {
	var b strings.Builder
	line := func(k, format string, args ...any) {
		fmt.Fprintf(&b, "%-10s %s\n", k+":", fmt.Sprintf(format, args...))
	}
	line("kind", "%s", f.Kind)
	if f.Kind == KindGPU {
		line("driver", "%s (CUDA %s, NVML %s)", dash(f.DriverVersion), dash(f.CUDADriverVersion), dash(f.NVMLVersion))
		trt := dash(f.TensorRTVersion)
		if f.TensorRTBuild != "" {
			trt += " build " + f.TensorRTBuild
		}
		line("tensorrt", "%s", trt)
		for _, g := range f.GPUs {
			extra := ""
			if g.Architecture != "" {
				extra += ", " + g.Architecture
			}
			if g.PCIBusID != "" {
				extra += ", pci " + g.PCIBusID
			}
			if g.MIGEnabled {
				extra += ", MIG on"
			}
			line(fmt.Sprintf("gpu %d", g.Index), "%s, sm %s, %s, %s%s",
				g.Name, g.ComputeCapability, gib(g.MemoryTotal), g.UUID, extra)
		}
	}
	c := f.CPU
	line("cpu", "%s (%s)", dash(c.Model), cpuCounts(c))
	if len(c.Flags) > 0 {
		line("cpu flags", "%s", strings.Join(c.Flags, " "))
	}
	line("ort", "%s", dash(f.ORTVersion))
	line("os/arch", "%s/%s", f.OS, f.Arch)
	if f.Host != "" {
		line("host", "%s", f.Host)
	}
	for _, n := range f.Notes {
		line("note", "%s", n)
	}
	return b.String()
}

// Text is the human form of a telemetry report.
func (r Report) Text() string {
	if !r.Monitored {
		return "telemetry: none\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "telemetry: gpu %d, %d samples, verdict %s\n", r.Device, r.SampleCount, r.Verdict())
	if len(r.Samples) > 0 {
		s := r.Samples[len(r.Samples)-1]
		fmt.Fprintf(&b, "           sm %d MHz, mem %d MHz, %d C, %.1f W, util %d%%, reasons %s, ecc %d/%d\n",
			s.SMClockMHz, s.MemClockMHz, s.TemperatureC, float64(s.PowerMW)/1000, s.GPUUtilPercent,
			dash(strings.Join(s.ReasonNames, ",")), s.ECCCorrected, s.ECCUncorrected)
	}
	for _, p := range r.Problems() {
		fmt.Fprintf(&b, "           %s\n", p)
	}
	if len(r.Unsupported) > 0 {
		fmt.Fprintf(&b, "           unsupported: %s\n", strings.Join(r.Unsupported, ", "))
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "           error: %s\n", e)
	}
	return b.String()
}

// Snapshot reads GPU index once, for `worker info`: a Monitor started and
// stopped at once, whose report holds two samples.
func Snapshot(ctx context.Context, lib nvml.Interface, index int) (Report, error) {
	m := NewMonitor(lib, MonitorOptions{})
	if err := m.Start(ctx, index, time.Hour); err != nil {
		return Report{}, err
	}
	return m.Stop(), nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func gib(b uint64) string {
	if b == 0 {
		return "memory ?"
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}

func cpuCounts(c CPU) string {
	var parts []string
	for _, n := range []struct {
		n    int
		what string
	}{{c.Sockets, "socket"}, {c.Cores, "core"}, {c.Threads, "thread"}} {
		switch {
		case n.n == 1:
			parts = append(parts, "1 "+n.what)
		case n.n > 1:
			parts = append(parts, fmt.Sprintf("%d %ss", n.n, n.what))
		}
	}
	parts = append(parts, fmt.Sprintf("%d usable", c.Usable))
	return strings.Join(parts, ", ")
}
