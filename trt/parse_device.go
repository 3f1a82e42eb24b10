package trt

import (
	"strconv"
	"strings"
)

// The "=== Device Information ===" block.

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
