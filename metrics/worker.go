package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
)

// Worker is one worker's series, on a registry of its own (with the Go
// runtime's and the process's). It implements jobs.Observer.
type Worker struct {
	reg *prometheus.Registry

	tasksStarted  *prometheus.CounterVec
	tasksFinished *prometheus.CounterVec
	taskDuration  *prometheus.HistogramVec
	phaseDuration *prometheus.HistogramVec
	slotsBusy     *prometheus.GaugeVec
	slotsTotal    *prometheus.GaugeVec
	handbacks     prometheus.Counter
	broken        prometheus.Gauge
	bytes         *prometheus.CounterVec
	lookups       *prometheus.CounterVec
	queueWait     *prometheus.HistogramVec
	candFailed    *prometheus.CounterVec
	inPhase       *prometheus.GaugeVec
	gpu           gpuGauges
}

// Task durations run from a reused graph (a second) to a TensorRT sweep of
// many candidates (hours); phases from a small download (milliseconds) to
// one long build.
var (
	taskBuckets  = prometheus.ExponentialBuckets(0.25, 2, 16)  // 0.25 s … 2.3 h
	waitBuckets  = prometheus.ExponentialBuckets(0.05, 3, 14)  // 50 ms … 22 h: a nightly's backlog waits hours
	phaseBuckets = prometheus.ExponentialBuckets(0.005, 3, 14) // 5 ms … 2.2 h
)

// NewWorker registers a worker's series. Every label value known in
// advance (the queues served, each outcome, phase, direction and lookup
// result) starts at zero, so that a dashboard and rate() see a series
// from the first scrape rather than from the first event.
func NewWorker(queues []string) *Worker {
	w := &Worker{
		reg: prometheus.NewRegistry(),
		tasksStarted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tunefleet_tasks_started_total", Help: "tune:graph tasks this worker was handed, by queue (hand-backs included).",
		}, []string{"queue"}),
		tasksFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tunefleet_tasks_finished_total",
			Help: "tune:graph tasks that ended, by queue, outcome (succeeded, failed, handed_back, reused) and failure class of a failed one.",
		}, []string{"queue", "outcome", "failure_class"}),
		taskDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tunefleet_task_duration_seconds", Help: "How long tune:graph tasks took, whatever their outcome, by queue.", Buckets: taskBuckets,
		}, []string{"queue"}),
		phaseDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tunefleet_phase_duration_seconds",
			Help: "How long each phase took: download and upload of a graph's files, build, check and benchmark of a candidate.", Buckets: phaseBuckets,
		}, []string{"phase"}),
		slotsBusy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tunefleet_slots_busy", Help: "Slots (one per GPU, or per concurrent CPU task) tuning now, by kind (gpu, cpu).",
		}, []string{"kind"}),
		slotsTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tunefleet_slots_total", Help: "Slots this worker has, by kind (gpu, cpu).",
		}, []string{"kind"}),
		handbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tunefleet_handbacks_total", Help: "Tasks handed back because their run is bound to another platform.",
		}),
		broken: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tunefleet_worker_broken", Help: "1 once this machine is broken (driver or GPU gone): it takes no tasks and is exiting.",
		}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tunefleet_bytes_transferred_total", Help: "Artifact bytes moved to (up) or from (down) the store; blobs already in place are not counted.",
		}, []string{"direction"}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tunefleet_result_index_lookups_total", Help: "Result index lookups of a graph's work key on this worker's platform, by result (hit: reused).",
		}, []string{"result"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tunefleet_queue_wait_seconds", Help: "How long tune:graph tasks waited in their queue, from enqueue to their first attempt's start, by queue.",
			Buckets: waitBuckets,
		}, []string{"queue"}),
		candFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tunefleet_candidates_failed_total",
			Help: "Candidates that failed inside a graph that still got a winner, by failure class (a graph with no winner counts in tasks_finished).",
		}, []string{"failure_class"}),
		// A gauge of this worker's tasks now in each phase, by queue:
		// bounded labels (queues × six phases), no run or graph ids; a
		// fleet's total is its sum over workers.
		inPhase: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tunefleet_tasks_in_phase",
			Help: "This worker's tune:graph tasks now in each phase, by queue: waiting (prefetched, for a slot), download, build, check, benchmark, upload.",
		}, []string{"queue", "phase"}),
		gpu: newGPUGauges(),
	}
	w.reg.MustRegister(w.tasksStarted, w.tasksFinished, w.taskDuration, w.phaseDuration, w.slotsBusy, w.slotsTotal,
		w.handbacks, w.broken, w.bytes, w.lookups, w.queueWait, w.candFailed, w.inPhase)
	w.gpu.register(w.reg)
	w.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, q := range queues {
		w.tasksStarted.WithLabelValues(q)
		w.taskDuration.WithLabelValues(q)
		for _, p := range runstate.ProgressPhases() {
			w.inPhase.WithLabelValues(q, p)
		}
		w.queueWait.WithLabelValues(q)
		for _, o := range jobs.Outcomes() {
			if o != jobs.OutcomeFailed {
				w.tasksFinished.WithLabelValues(q, string(o), "")
			}
		}
	}
	for _, p := range jobs.Phases() {
		w.phaseDuration.WithLabelValues(p)
	}
	w.bytes.WithLabelValues(jobs.DirectionUp)
	w.bytes.WithLabelValues(jobs.DirectionDown)
	for _, c := range []backend.FailureClass{backend.FailBuild, backend.FailRuntime, backend.FailWrongAnswer, backend.FailTimeout,
		backend.FailInfrastructure, backend.FailUnavailable} {
		w.candFailed.WithLabelValues(string(c))
	}
	w.lookups.WithLabelValues("hit")
	w.lookups.WithLabelValues("miss")
	return w
}

// Handler serves the series in Prometheus's exposition formats.
func (w *Worker) Handler() http.Handler {
	return promhttp.HandlerFor(w.reg, promhttp.HandlerOpts{Registry: w.reg})
}

// Gatherer is the worker's registry, for tests and tools that read it.
func (w *Worker) Gatherer() prometheus.Gatherer { return w.reg }

var _ jobs.Observer = (*Worker)(nil)

func (w *Worker) TaskStarted(queue string) { w.tasksStarted.WithLabelValues(queue).Inc() }

func (w *Worker) TaskFinished(queue string, o jobs.Outcome, class string, d time.Duration) {
	w.tasksFinished.WithLabelValues(queue, string(o), class).Inc()
	w.taskDuration.WithLabelValues(queue).Observe(d.Seconds())
}

func (w *Worker) PhaseDone(phase string, d time.Duration) {
	w.phaseDuration.WithLabelValues(phase).Observe(d.Seconds())
}

func (w *Worker) Slots(kind string, busy, total int) {
	w.slotsBusy.WithLabelValues(kind).Set(float64(busy))
	w.slotsTotal.WithLabelValues(kind).Set(float64(total))
}

func (w *Worker) HandedBack() { w.handbacks.Inc() }

func (w *Worker) Transferred(direction string, n int64) {
	w.bytes.WithLabelValues(direction).Add(float64(n))
}

func (w *Worker) ResultIndexLookup(hit bool) {
	r := "miss"
	if hit {
		r = "hit"
	}
	w.lookups.WithLabelValues(r).Inc()
}

func (w *Worker) QueueWait(queue string, d time.Duration) {
	w.queueWait.WithLabelValues(queue).Observe(d.Seconds())
}

func (w *Worker) CandidateFailed(class string) { w.candFailed.WithLabelValues(class).Inc() }

func (w *Worker) TaskPhase(queue, from, to string) {
	if from != "" {
		w.inPhase.WithLabelValues(queue, from).Dec()
	}
	if to != "" {
		w.inPhase.WithLabelValues(queue, to).Inc()
	}
}

// SetBroken records whether the machine is broken.
func (w *Worker) SetBroken(broken bool) {
	v := 0.0
	if broken {
		v = 1
	}
	w.broken.Set(v)
}
