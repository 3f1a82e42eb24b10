// Package cli holds the command-line interfaces of the producer and worker
// binaries: cobra wiring, flag parsing and output formatting over the
// packages that do the work. The mains in cmd/ only call Execute.
package cli
