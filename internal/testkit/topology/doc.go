// Package topology keeps tunefleet working on the Redis topologies a
// fleet outgrows one server with: a Redis Cluster (three masters with a
// replica each) and Sentinel (a master, a replica, three sentinels),
// started on loopback by internal/testkit/testsvc.
//
// Its tests run the whole pipeline as a user does (internal/testkit/stack:
// `worker run` and the producer's commands as processes, real ONNX
// Runtime, the trtexec stand-in) against each topology: submit, workers
// tuning, finalize, status, runs, cancel, reconcile, retention, two
// nightlies (the second unchanged) and the morning report, history, gc and
// `producer serve`; then a failover while a task is being tuned: CLUSTER
// FAILOVER of the master holding the run's slots (and its queue's), or the
// Sentinel master SIGKILLed. The run must finish, finalized exactly once.
//
// It also holds the static check that keeps multi-key Redis operations
// in one cluster slot (CheckSlots): every redis.NewScript's keys, every
// multi-key command and every MULTI/EXEC pipeline in the module's Go
// source must name keys that share a hash tag.
package topology
