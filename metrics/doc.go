// Package metrics exports what a worker does as Prometheus series, served
// on its --health address at /metrics: tasks started and finished by queue,
// outcome and failure class, task and phase durations as histograms, slots
// busy and total, hand-backs, the broken state, bytes transferred, result
// index lookups, and per-GPU telemetry gauges while a GPU benchmarks.
//
// Worker implements jobs.Observer, so that jobs and tuner, which deploy
// tooling imports, do not depend on Prometheus; only the worker's command
// line wires this package in. Series names are a contract: the Grafana
// dashboard in deploy/grafana is built on them, and a test fails when one
// of its queries names a series nothing exports.
package metrics
