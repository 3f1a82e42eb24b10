// Package importgraph holds a test of the import graph: which packages
// may pull in which, checked with `go list -deps` on the real module so
// that an import added anywhere below a room shows. It keeps what ships
// (cmd/...) free of test harnesses, the queue and the tuner free of
// Prometheus, the web UI and metrics, run bookkeeping (runstate) below
// the queue (jobs) and free of the store and backends, and the result
// index (resultindex) off Redis.
//
// It has no code of its own; nothing imports it.
package importgraph
