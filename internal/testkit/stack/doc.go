// Package stack runs the queue pipeline as a user does, for the tests that
// need real processes (internal/testkit/e2e, internal/testkit/faults): a redis-server and a
// versitygw of the test's own (internal/testkit/testsvc), `worker run` processes,
// the producer's commands as processes, and bundles of real ONNX models
// with reference outputs from ONNX Runtime.
//
// Every process is the test binary itself, started in a role (Main
// dispatches on the environment), so a test package needs no binary built
// beforehand: its TestMain calls Main. Each process gets the stack's S3
// credentials in its own environment, never the test process's, so tests
// of one package run in parallel with a server each.
//
// It also checks what a run left in the store: every blob re-hashes to its
// key (VerifyBlobs) and every blob is referenced by a manifest (Orphans).
package stack
