// Package memtest holds the tests that bound the memory of tunefleet's
// processes on big models (issue 9, "flat memory"): `producer bundle
// validate`, `producer submit` and a `worker run` with --concurrency 2
// --prefetch 1, each a real process whose peak RSS is read from the kernel
// (stack.PeakRSS, the VmHWM it reports as it exits (stack.RunProducer)). The models are generated at test
// time by a streaming writer (stack.WriteBigModel) and removed after; they
// are 256 MiB, big enough that holding one breaks the bounds by 2 to 4
// times (memory_test.go says why), where multi-GiB ones only cost CI time.
package memtest
