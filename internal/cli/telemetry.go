package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/metrics"
)

// gpuTelemetry watches the GPU a benchmark runs on: the task's environment
// pins it (CUDA_VISIBLE_DEVICES=<uuid>), the fingerprint says which NVML
// device that is. Its samples are exported as mw's GPU gauges while it
// watches. It returns nil on machines without GPUs.
func gpuTelemetry(fp gpu.Fingerprint, mw *metrics.Worker) func(ctx context.Context, env []string) (func() (string, []string), error) {
	if fp.Kind != gpu.KindGPU {
		return nil
	}
	return func(ctx context.Context, env []string) (func() (string, []string), error) {
		idx := -1
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "CUDA_VISIBLE_DEVICES="); ok {
				for i, g := range fp.GPUs {
					if g.UUID == v || fmt.Sprint(g.Index) == v {
						idx = i
					}
				}
			}
		}
		if idx < 0 {
			idx = 0
		}
		m := gpu.NewMonitor(gpu.DefaultLibrary(), gpu.MonitorOptions{OnSample: mw.GPUSample, OnStop: mw.GPUStopped})
		if err := m.Start(ctx, fp.GPUs[idx].Index, 200*time.Millisecond); err != nil {
			return nil, err
		}
		return func() (string, []string) {
			r := m.Stop()
			return string(r.Verdict()), r.Problems()
		}, nil
	}
}
