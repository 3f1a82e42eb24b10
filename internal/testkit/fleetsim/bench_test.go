package fleetsim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Sizes are the nights of `make bench-fleet`, scaled down to a 2-core
// machine: the graphs of issue 35's nights (1,000, 10,000, 100,000), over
// its workers (10, 100, 500) as worker processes × task slots (a
// process per simulated GPU would be hundreds of Go processes polling
// Redis: each process's slots share one asynq server, one poll loop).
var Sizes = map[int]Config{
	1000:   {Models: 50, GraphsPerModel: 20, Procs: 5, Slots: 2},
	10000:  {Models: 100, GraphsPerModel: 100, Procs: 10, Slots: 10},
	100000: {Models: 200, GraphsPerModel: 500, Procs: 25, Slots: 20},
}

// DefaultReplay is the nights' build times: lognormal, median 60 s (a
// TensorRT build of a mid-size graph), sigma 0.8 (the 10th to the 90th
// percentile 21 s to 167 s), compressed 60× (a 60-s build sleeps 1 s).
const DefaultReplay = "dist=lognormal,median=60s,sigma=0.8,scale=60,seed=1"

// BenchmarkFleet runs one simulated night per size of
// TUNEFLEET_FLEET_SIZES (default "1000,10000"; 100000 is opt-in: about
// an hour of the 2-core machine) on TUNEFLEET_FLEET_REDIS (single or
// cluster; default single) and TUNEFLEET_FLEET_STORE (file or s3; default
// file), with TUNEFLEET_FLEET_REPLAY's durations (default DefaultReplay), and
// prints each night's table and then the largest night's per-graph rows
// against the smallest's. TUNEFLEET_FLEET_TALLY=1 (single Redis) adds each
// night's Redis commands by sender and command (Config.Tally; MONITOR's
// own cost then lands in the Redis CPU rows).
func BenchmarkFleet(b *testing.B) {
	sizes := envOr("TUNEFLEET_FLEET_SIZES", "1000,10000")
	spec := envOr("TUNEFLEET_FLEET_REPLAY", DefaultReplay)
	var results []Result
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		c, ok := Sizes[n]
		if err != nil || !ok {
			b.Fatalf("TUNEFLEET_FLEET_SIZES: %q: sizes are 1000, 10000, 100000", s)
		}
		c.Redis = envOr("TUNEFLEET_FLEET_REDIS", "single")
		c.Store = envOr("TUNEFLEET_FLEET_STORE", "file")
		c.Replay = spec
		if k := os.Getenv("TUNEFLEET_FLEET_CLASSES"); k != "" {
			if c.Classes, err = strconv.Atoi(k); err != nil || c.Classes < 1 {
				b.Fatalf("TUNEFLEET_FLEET_CLASSES: %q: a number of target classes, 1 or more", k)
			}
		}
		c.Log = os.Stderr
		c.Tally = os.Getenv("TUNEFLEET_FLEET_TALLY") != ""
		b.Run(fmt.Sprintf("graphs=%d", n), func(b *testing.B) {
			for range b.N {
				r := Run(b, c)
				fmt.Print(r.Table())
				results = append(results, r)
			}
		})
	}
	if t := CompareTable(results); t != "" {
		fmt.Print(t)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
