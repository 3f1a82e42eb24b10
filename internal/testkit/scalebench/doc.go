// Package scalebench holds the scale benchmarks of issue 9 (`make
// bench-scale`; CI does not run them): per-task overhead with tuning taken
// out at 50 to 2,000 graphs, the run.json a task reads, a forced re-run
// against a cold one, what Redis keeps after runs past their retention and
// what `producer runs` costs with a long history, a 200-graph submit to S3
// counted request by request, and the peak RSS of validate, submit and a
// worker's download on a generated multi-GiB model.
//
// Everything runs against real services on loopback (redis-server and
// versitygw from internal/testkit/testsvc) and real workers (jobs.Worker in this
// process, or `producer`/`worker` commands as child processes of the test
// binary, for RSS). Benchmarks only print: each adds rows to one summary
// table (row, measured, target, met?) that TestMain prints at the end, so
// the output of `make bench-scale` ends with it. Ratios are measured side
// by side in one run, and medians are of three rounds where a round is
// cheap.
//
// The code has no non-test files besides this one: nothing here ships.
package scalebench
