// Package nightplan plans a night from history: how long each graph's
// tuning is expected to take, in which order a class's graphs go to its
// workers, and when the night is expected to end.
//
// Estimate: a graph's expected seconds are what it took when it was
// last tuned with the same candidates on the same target class, the
// median of the last few such nights (the model's history; a reused
// graph's entry keeps what it had cost when it was tuned). Work with no history gets the class's default: the median
// of the graphs of that class with a history tonight, else a configured
// constant.
//
// Order: within a class, higher fleet priority first, then longest
// expected first (LPT: list scheduling longest-first is within 4/3 of the
// best makespan, and in practice close to the lower bound), ties in
// submission order. A queue is FIFO, so the enqueue order is the order
// workers take the tasks in.
//
// Finish: the night's makespan per class is simulated by list scheduling
// of the ordered estimates on the class's workers (registered, or an
// assumed count for a class that scales from zero); the night ends when
// its slowest class does. WorkersToFit is the fewest workers whose
// simulated makespan fits before a deadline.
//
// Everything here is pure: no I/O, no clock; callers pass the history
// they read and the time it is. It imports nothing of tunefleet but noise
// (the median of its estimates is noise's quantile), internal/human (how
// its messages write a duration) and internal/clip (how much of a flag's
// value they repeat), all pure.
package nightplan
