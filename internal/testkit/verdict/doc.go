// Package verdict is how a `make bench` row states its verdict: `met: yes`,
// `met: NO`, or `met: undecided (why)` when the row's own measurements say
// the machine could not tell (its tasks ran far from their nominal size,
// the machine's speed changed between the legs it compares). A row that
// cannot decide must say so instead of printing yes: on a loaded machine a
// "small" task took 7.7 s instead of 73 ms, and every queue ÷ direct row
// still printed `met: yes` (issue 30).
package verdict
