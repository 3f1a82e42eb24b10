// Package report is the morning report of a nightly: it reads the plan
// the nightly submission wrote (nightly/<id>/plan.json) and each run's
// history entry, and writes nightly/<id>/summary.json and a
// self-contained nightly/<id>/report.html (charts drawn here as inline
// SVG; the page fetches nothing). Notify delivers a Slack-compatible
// webhook at least once per nightly when the summary has regressions or
// failures (internal/webhook: one delivery id on every try, backoff), and
// records the delivery in notified.json, which the summary and the page
// show.
//
// It reads the plan into its own minimal type rather than importing the
// package that writes it: plan.json is the contract between the two.
package report
