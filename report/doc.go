// Package report is the morning report of a nightly: it reads the plan
// the nightly submission wrote (nightly/<id>/plan.json) and each run's
// history entry, and writes nightly/<id>/summary.json and a
// self-contained nightly/<id>/report.html (charts drawn here as inline
// SVG; the page fetches nothing). Notify sends a Slack-compatible webhook
// once per nightly when the summary has regressions or failures.
//
// It reads the plan into its own minimal type rather than importing the
// package that writes it: plan.json is the contract between the two.
package report
