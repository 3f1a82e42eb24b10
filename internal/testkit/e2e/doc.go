// Package e2e holds the end-to-end tests of the queue pipeline: a real
// redis-server and a real S3 server (versitygw) on loopback, worker
// processes (this test binary, started as `worker run`), real ONNX Runtime
// engines, and the producer's commands as a user runs them. trt: candidates
// go through a worker whose --trtexec is this test binary acting as the
// stand-in of internal/testkit/trtreplay, which replays real trtexec fixture logs
// and exports (it is never TensorRT).
package e2e
