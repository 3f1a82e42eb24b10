// Package shapes holds AITune's shape model as tunefleet needs it: tensor
// specs with labelled axes ("batch<i>", "dim<i>" or a static size), explicit
// dynamic dims that take precedence over recorded bounds, optimization
// profiles (min/opt/max per input), the batch sizes a benchmark sweeps, and
// checks that a sample fits a spec or a profile.
//
// Everything here is a pure function of its arguments: no I/O, no clocks.
package shapes
