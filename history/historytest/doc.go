// Package historytest writes history as finalize does (each entry under its
// platform and its target class, named in both heads), for tests and
// benchmarks that need a store holding a model's nights.
package historytest
