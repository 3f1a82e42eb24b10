// Package runreport renders one run for a person: every graph's
// candidates (status, failure class and message, p50/p90/p99 at each batch
// size), a throughput-vs-batch chart per graph with one series per
// candidate, the winner and why, and links to logs and engines.
//
// The same renderer makes two things. Finalize writes Page as
// runs/<run>/report.html: self-contained (inline SVG charts and CSS, no
// script, nothing fetched), so deploy tooling and CI can attach one file.
// `producer serve` embeds Body in its run page, with links to the blobs it
// serves. It sits below jobs (which finalizes) and web (which serves), and
// imports neither.
package runreport
