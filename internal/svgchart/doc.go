// Package svgchart draws the small charts tunefleet's pages show — bars,
// grouped columns and line charts — as inline SVG, server-side: a page that
// holds one needs no script, stylesheet or font, so the same chart works in
// `producer serve`, a run's report.html opened from disk, and the nightly
// morning report.
//
// Every chart is an <svg class="chart"> that says what it draws in data-
// attributes (data-kind, data-series, data-points), each series a
// <g class="series" data-name=…> and each point or bar an element of class
// "point" or "bar": tests count them in a real browser, and a person reading
// the page source can too. Values show in <title> tooltips.
package svgchart
