// Package testsvc starts real services on loopback for integration tests:
// redis-server (Debian package) and versitygw (an S3 server built from the Go
// module proxy, `make versitygw`). Each server belongs to the test that
// started it and is stopped by t.Cleanup; its log is kept and its tail
// printed when the test failed.
//
// When the environment names a service already running (REDIS_URL,
// S3_ENDPOINT with S3_ACCESS_KEY/S3_SECRET_KEY, as a CI job may set them),
// that one is used instead, and tests share it: give each test its own queue
// names or bucket (S3 does that for you).
//
// For fault injection (internal/testkit/faults), OwnRedis and OwnS3 always start a
// server of the test's own, which the test may kill, stop, freeze (SIGSTOP)
// and start again on the same port and data; Proxy is a TCP fault proxy
// (latency, resets, a frozen link, refused connections) to put between
// clients and a server.
//
// OwnRedisCluster and OwnRedisSentinel start the Redis topologies a fleet
// may run on instead of one server, on loopback: a Cluster of three masters
// with a replica each (redis-cli --cluster create), and a Sentinel set (a
// master, a replica, three sentinels, quorum 2). Their URLs are what
// --redis takes; Failover (CLUSTER FAILOVER of a key's slot) and
// KillMaster (the sentinels promote the replica) move the master under a
// running pipeline (internal/testkit/topology).
//
// A missing binary skips the test with a message saying how to install it,
// except when CI is set: then it fails, so that a broken CI setup cannot
// turn into silently skipped tests.
package testsvc
