// Package compare puts two runs side by side, graph by graph: the winner
// of each, its throughput with its interval over the rounds of its
// measurement, the ratio of the two (b over a) with its interval, and
// whether it is beyond noise by the same rule a winner is decided by
// (noise.Ratio.Decide with noise.MinGain). The rounds of two runs were not
// interleaved with each other, so the ratio is Welch's, never paired.
//
// Load reads a run from the store (run.json and each graph's result.json);
// Runs compares two loaded runs. `producer compare` and the web UI's
// /compare page are its two faces.
package compare
