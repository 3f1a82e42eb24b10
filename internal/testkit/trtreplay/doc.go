// Package trtreplay is a STAND-IN FOR trtexec IN TESTS ONLY. IT IS NOT
// TensorRT, it runs no model and measures nothing, and nothing outside
// test code may use it: only _test.go files (and this package itself) may
// import it, which TestOnlyTestsImportThis enforces over the whole module.
//
// A test binary becomes the stand-in by calling Main from its TestMain when
// the environment variable Env names a JSON Config; the test then hands
// its own executable to whatever runs trtexec (trt.Options.Executable,
// `worker run --trtexec`). Each invocation
//
//   - records its argv and working directory as one JSON line (ReadArgv),
//   - replays a real trtexec fixture log: [W]/[E]/[F] lines to stderr and
//     everything else to stdout, as trtexec's logger does,
//   - writes the files its command line asks for (--saveEngine: a fake
//     plan header; --timingCacheFile, --exportTimes, --exportLayerInfo,
//     --exportOutput: the reference outputs recorded for exactly the bytes
//     of the --loadInputs files),
//   - and exits with the configured status or dies by the configured
//     signal.
//
// What it prints and writes comes from the fixtures in
// ../shared/fixtures/trtexec (FixtureDir): the code under test is held to
// trtexec's real output, never to this package's idea of it.
package trtreplay
