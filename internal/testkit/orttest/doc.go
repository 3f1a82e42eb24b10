// Package orttest is what every test package that builds ONNX Runtime
// engines needs: a TestMain that lets the test binary serve as its own
// session child, and a guard for tests that need the library.
package orttest
