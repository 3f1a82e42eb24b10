// Package memtest holds the tests that bound the memory of tunefleet's
// processes on multi-GiB models (issue 9, "flat memory"): `producer bundle
// validate`, `producer submit` and a `worker run` with --concurrency 2
// --prefetch 1, each a real process whose peak RSS is read from the kernel
// (stack.PeakRSS, the VmHWM it reports as it exits (stack.RunProducer)). The models are generated at test
// time by a streaming writer (stack.WriteBigModel) and removed after.
package memtest
