// Package parallel runs n independent calls with a bound on how many run
// at once and stops at the first error: the one loop the finalize and the
// result index use to read and write many graphs' objects, whose latency,
// not bandwidth, is what they wait on.
package parallel
