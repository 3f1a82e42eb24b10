package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tunefleet/tunefleet/gpu"
)

// gpuGauges are the telemetry of each GPU while it benchmarks. They exist
// only then: a GPU's series are removed when its benchmark's monitor stops,
// so that a dashboard shows gaps between benchmarks instead of the last
// reading held for hours.
type gpuGauges struct {
	temp, clock, power, throttle *prometheus.GaugeVec
}

func newGPUGauges() gpuGauges {
	g := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, append([]string{"gpu"}, labels...))
	}
	return gpuGauges{
		temp:     g("tunefleet_gpu_temperature_celsius", "GPU temperature while it benchmarks, by NVML index."),
		clock:    g("tunefleet_gpu_sm_clock_mhz", "GPU SM clock while it benchmarks, by NVML index."),
		power:    g("tunefleet_gpu_power_watts", "GPU power draw while it benchmarks, by NVML index."),
		throttle: g("tunefleet_gpu_throttle_reasons", "1 for each clock event (throttle) reason NVML reports while the GPU benchmarks.", "reason"),
	}
}

func (g gpuGauges) register(r prometheus.Registerer) {
	r.MustRegister(g.temp, g.clock, g.power, g.throttle)
}

// GPUSample sets a GPU's gauges from one telemetry sample (it is
// gpu.MonitorOptions.OnSample). Every known reason has a series, 0 or 1,
// so that a reason going away is seen as 0, not as a vanished series; an
// unknown bit (reason_0x…) gets one while it is set.
func (w *Worker) GPUSample(device int, s gpu.Sample) {
	id := strconv.Itoa(device)
	w.gpu.temp.WithLabelValues(id).Set(float64(s.TemperatureC))
	w.gpu.clock.WithLabelValues(id).Set(float64(s.SMClockMHz))
	w.gpu.power.WithLabelValues(id).Set(float64(s.PowerMW) / 1000)
	active := map[string]bool{}
	for _, r := range s.ReasonNames {
		active[r] = true
	}
	for _, r := range append(gpu.KnownReasons(), s.ReasonNames...) {
		v := 0.0
		if active[r] {
			v = 1
		}
		w.gpu.throttle.WithLabelValues(id, r).Set(v)
	}
}

// GPUStopped removes a GPU's gauges (gpu.MonitorOptions.OnStop).
func (w *Worker) GPUStopped(device int) {
	l := prometheus.Labels{"gpu": strconv.Itoa(device)}
	w.gpu.temp.DeletePartialMatch(l)
	w.gpu.clock.DeletePartialMatch(l)
	w.gpu.power.DeletePartialMatch(l)
	w.gpu.throttle.DeletePartialMatch(l)
}
