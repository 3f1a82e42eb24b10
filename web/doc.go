// Package web is `producer serve`: a read-only web UI over the fleet's
// Redis and store. Pages (Go html/template, assets embedded, charts drawn
// server-side as SVG by internal/svgchart, no script of ours):
//
//	/                 runs, newest first, filtered by model, status and target, a page at a time
//	/runs/{run}       a run: its graphs and candidates, charts, winners and why (runreport.Body)
//	/models/{model}   a model's history on each platform, winner changes marked
//	/fleet            models × platforms: the newest best throughput, regressions and failures coloured
//	/blobs/sha256/{h} a stored log or engine, read-only
//	/monitor/         asynqmon, read-only
//	/metrics          tunefleet_queue_tasks{queue,state} and tunefleet_runs{status}
//
// It writes nothing unless Config.Write is set; then a run page has a
// Cancel button (a POST checked for same origin and a token), which does
// what `producer cancel` does. Authentication (a bearer token, or basic
// auth) is optional on loopback; the CLI refuses a non-loopback address
// without it.
package web
