// Package e2e holds the end-to-end tests of the queue pipeline: a real
// redis-server and a real S3 server (versitygw) on loopback, worker
// processes (this test binary, started as `worker run`), real ONNX Runtime
// engines, and the producer's commands as a user runs them.
package e2e
