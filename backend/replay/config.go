package replay

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Env is the environment variable that turns the replay backend on, with
// its spec: "dist=lognormal,median=60s,sigma=0.8,scale=400,seed=1" or
// "history=durations.txt,scale=400".
const Env = "TUNEFLEET_REPLAY"

// Distributions Parse accepts.
const (
	DistLognormal = "lognormal" // median·e^(sigma·z), z standard normal
	DistFixed     = "fixed"     // median, every graph
)

// Config is a parsed TUNEFLEET_REPLAY spec.
type Config struct {
	// Dist is DistLognormal or DistFixed; ignored for graphs a history
	// names.
	Dist   string
	Median time.Duration
	Sigma  float64
	// Scale is the compression factor K: a simulated build of d sleeps
	// d/K. 1 replays in real time.
	Scale float64
	// Seed makes another draw of the same fleet; the same seed, model,
	// graph and candidate always draw the same duration.
	Seed uint64
	// Latency is the simulated engine's latency per sample of a batch,
	// what Benchmark's calls sleep (not compressed: it is a per-call
	// figure, not part of the night's time budget).
	Latency time.Duration

	// History is the file the durations came from ("" for none): each
	// line "MODEL/GRAPH DURATION" (that graph's own) or "DURATION" (the
	// night's spread, drawn from for graphs it does not name).
	History string
	spec    string
	byGraph map[string]time.Duration
	spread  []time.Duration // sorted
}

// Lookup parses TUNEFLEET_REPLAY when it is set: the config, whether it
// is set (a simulation), and the spec's error.
func Lookup() (Config, bool, error) {
	spec, ok := os.LookupEnv(Env)
	if !ok {
		return Config{}, false, nil
	}
	c, err := Parse(spec)
	return c, true, err
}

// Spec is the spec c was parsed from, for a log line: the environment's.
func (c Config) Spec() string { return c.spec }

// Parse reads a spec: comma-separated key=value pairs, keys dist, median,
// sigma, scale, seed, latency, history. Durations are Go durations
// ("90s") or seconds ("90").
func Parse(spec string) (Config, error) {
	c := Config{Dist: DistLognormal, Median: time.Minute, Sigma: 0.8, Scale: 1, Latency: time.Millisecond, spec: spec}
	for _, kv := range strings.Split(spec, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return Config{}, fmt.Errorf("%s: %q is not key=value (keys: dist, median, sigma, scale, seed, latency, history)", Env, kv)
		}
		var err error
		switch k {
		case "dist":
			if v != DistLognormal && v != DistFixed {
				err = fmt.Errorf("unknown distribution (lognormal or fixed)")
			}
			c.Dist = v
		case "median":
			c.Median, err = parseDuration(v)
		case "latency":
			c.Latency, err = parseDuration(v)
		case "sigma":
			c.Sigma, err = strconv.ParseFloat(v, 64)
			if err == nil && (c.Sigma < 0 || math.IsNaN(c.Sigma) || math.IsInf(c.Sigma, 0)) {
				err = fmt.Errorf("must be ≥ 0")
			}
		case "scale":
			c.Scale, err = strconv.ParseFloat(v, 64)
			if err == nil && (!(c.Scale > 0) || math.IsInf(c.Scale, 0)) {
				err = fmt.Errorf("must be > 0")
			}
		case "seed":
			c.Seed, err = strconv.ParseUint(v, 10, 64)
		case "history":
			c.History = v
		default:
			err = fmt.Errorf("unknown key (keys: dist, median, sigma, scale, seed, latency, history)")
		}
		if err != nil {
			return Config{}, fmt.Errorf("%s: %s=%s: %w", Env, k, v, err)
		}
	}
	if c.History != "" {
		if err := c.loadHistory(); err != nil {
			return Config{}, fmt.Errorf("%s: %w", Env, err)
		}
	}
	return c, nil
}

func parseDuration(v string) (time.Duration, error) {
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 || math.IsNaN(s) || math.IsInf(s, 0) {
			return 0, fmt.Errorf("must be ≥ 0")
		}
		return time.Duration(s * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err == nil && d < 0 {
		err = fmt.Errorf("must be ≥ 0")
	}
	return d, err
}

// loadHistory reads the history file: blank lines and # comments skipped.
func (c *Config) loadHistory() error {
	f, err := os.Open(c.History)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	c.byGraph = map[string]time.Duration{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) > 2 {
			return fmt.Errorf("history %s:%d: %q: want \"MODEL/GRAPH DURATION\" or \"DURATION\"", c.History, n, line)
		}
		d, err := parseDuration(fields[len(fields)-1])
		if err != nil {
			return fmt.Errorf("history %s:%d: %w", c.History, n, err)
		}
		if len(fields) == 2 {
			c.byGraph[fields[0]] = d
		}
		c.spread = append(c.spread, d)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("history %s: %w", c.History, err)
	}
	if len(c.spread) == 0 {
		return fmt.Errorf("history %s: no durations", c.History)
	}
	slices.Sort(c.spread)
	return nil
}

// Simulated is the build time drawn for one candidate of one graph: the
// history's figure for the graph when it names it, else a draw from the
// history's spread or the distribution, at a quantile fixed by the seed,
// model, graph and candidate (the same inputs draw the same time in every
// process, so the simulator can compute a night's total work without
// asking the workers).
func (c Config) Simulated(model, graph, candidate string) time.Duration {
	if d, ok := c.byGraph[model+"/"+graph]; ok {
		return d
	}
	u := c.quantile(model, graph, candidate)
	if len(c.spread) > 0 {
		return c.spread[min(int(u*float64(len(c.spread))), len(c.spread)-1)]
	}
	if c.Dist == DistFixed {
		return c.Median
	}
	z := math.Sqrt2 * math.Erfinv(2*u-1)
	return time.Duration(float64(c.Median) * math.Exp(c.Sigma*z))
}

// Compressed is what a build of simulated time d sleeps: d/Scale.
func (c Config) Compressed(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.Scale)
}

// quantile maps the draw's identity to (0, 1), uniformly.
func (c Config) quantile(model, graph, candidate string) float64 {
	h := sha256.New()
	var seed [8]byte
	binary.LittleEndian.PutUint64(seed[:], c.Seed)
	h.Write(seed[:])
	for _, s := range []string{model, graph, candidate} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	x := binary.LittleEndian.Uint64(h.Sum(nil))
	// 53 bits, offset by half a step: never 0 or 1, where Erfinv is ±Inf.
	return (float64(x>>11) + 0.5) / (1 << 53)
}
