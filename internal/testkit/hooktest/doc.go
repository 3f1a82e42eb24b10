// Package hooktest is a local Slack-compatible webhook receiver for
// tests: a real HTTP server on loopback that keeps every body it is
// posted, so a test can count what a nightly, a report or a deadline
// warning sent and read what it said.
package hooktest
