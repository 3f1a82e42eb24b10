package fleetsim

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clockTick is the kernel's USER_HZ, the unit of /proc/PID/stat's times:
// 100 on every Linux a Go test runs on.
const clockTick = 100

// procCPU is a process's processor time (user and system, its own and its
// waited-for children's) from /proc/PID/stat; 0 when it cannot be read
// (the process is gone, or this is not Linux).
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after its closing one.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	// After the name: state(0) … utime(11) stime(12) cutime(13) cstime(14).
	if len(f) < 15 {
		return 0
	}
	var ticks int64
	for _, k := range []int{11, 12, 13, 14} {
		v, _ := strconv.ParseInt(f[k], 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTick
}

// redisStats is what INFO says of the Redis servers (summed over nodes).
type redisStats struct {
	Calls      int64            // commands executed (commandstats), masters only
	CPU        time.Duration    // used_cpu_sys + used_cpu_user, every node
	UsedMemory int64            // used_memory, masters only, less their replication buffers
	PerMaster  []int64          // Calls per master, in address order
	MasterCPU  []time.Duration  // CPU per master, in address order
	ByCommand  map[string]int64 // Calls by command, masters only
}

// readRedis reads INFO from every master (commands, memory) and every
// node (CPU: a replica's work is the coordinator's too).
func readRedis(ctx context.Context, masters, all []string) (redisStats, error) {
	st := redisStats{ByCommand: map[string]int64{}}
	isMaster := map[string]bool{}
	for _, m := range masters {
		isMaster[m] = true
	}
	for _, addr := range all {
		c := redis.NewClient(&redis.Options{Addr: addr})
		info, err := c.Info(ctx, "commandstats", "cpu", "memory").Result()
		c.Close()
		if err != nil {
			return st, fmt.Errorf("INFO from %s: %w", addr, err)
		}
		var calls int64
		var cpu time.Duration
		for _, line := range strings.Split(info, "\n") {
			line = strings.TrimSpace(line)
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch {
			case strings.HasPrefix(k, "cmdstat_"):
				// calls=N,usec=…
				for _, kv := range strings.Split(v, ",") {
					if n, ok := strings.CutPrefix(kv, "calls="); ok {
						x, _ := strconv.ParseInt(n, 10, 64)
						calls += x
						if isMaster[addr] {
							st.ByCommand[strings.TrimPrefix(k, "cmdstat_")] += x
						}
					}
				}
			case k == "used_cpu_sys" || k == "used_cpu_user":
				x, _ := strconv.ParseFloat(v, 64)
				cpu += time.Duration(x * float64(time.Second))
			case k == "used_memory" && isMaster[addr]:
				x, _ := strconv.ParseInt(v, 10, 64)
				st.UsedMemory += x
			case (k == "mem_replication_backlog" || k == "mem_clients_slaves") && isMaster[addr]:
				// A master's backlog (1 MiB by default, allocated at its
				// replica's first sync) and its replicas' output buffers
				// are the same whatever the night's size: not the night's
				// data, so not per graph.
				x, _ := strconv.ParseInt(v, 10, 64)
				st.UsedMemory -= x
			}
		}
		st.CPU += cpu
		if isMaster[addr] {
			st.Calls += calls
			st.PerMaster = append(st.PerMaster, calls)
			st.MasterCPU = append(st.MasterCPU, cpu)
		}
	}
	return st, nil
}

// countingProxy is an HTTP reverse proxy in front of versitygw that
// counts the requests S3 really sees (below the store's retries, parallel
// parts and existence checks). It keeps the client's Host header, so
// SigV4 signatures stay valid.
type countingProxy struct {
	URL string
	n   atomic.Int64
}

func startCountingProxy(tb testing.TB, target string) *countingProxy {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	p := &countingProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	// Enough idle connections that hundreds of workers reuse them instead
	// of paying a dial per request through the proxy.
	rp.Transport = &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, DisableCompression: true}
	srv := httptestServer(tb, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.n.Add(1)
		rp.ServeHTTP(w, r)
	}))
	p.URL = srv
	return p
}

// quantile is the p-quantile of xs by linear interpolation (xs sorted).
func quantile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	pos := p * float64(len(xs)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(xs)-1)
	return xs[lo] + (xs[hi]-xs[lo])*(pos-float64(lo))
}

// median of xs (not sorted in place).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return quantile(s, 0.5)
}

// topCommands names the n commands sent most between two readings, with
// their calls per graph: "evalsha 20.1, brpoplpush 9.3, …".
func topCommands(before, after redisStats, own map[string]int64, graphs float64, n int) string {
	type kv struct {
		cmd string
		d   int64
	}
	var ds []kv
	for cmd, x := range after.ByCommand {
		if d := x - before.ByCommand[cmd] - own[cmd]; d > 0 {
			ds = append(ds, kv{cmd, d})
		}
	}
	slices.SortFunc(ds, func(a, b kv) int { return int(b.d - a.d) })
	var parts []string
	for _, e := range ds[:min(n, len(ds))] {
		parts = append(parts, fmt.Sprintf("%s %.1f", e.cmd, float64(e.d)/graphs))
	}
	return strings.Join(parts, ", ")
}
