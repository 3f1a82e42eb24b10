// Package human writes figures for people: one rule for every table,
// chart, page and report, so a throughput reads 15.2M everywhere and a
// slow model's 0.1 samples/s never prints as 0.
package human
