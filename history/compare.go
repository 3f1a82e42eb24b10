package history

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/strategy"
)

// Change kinds, from comparing an entry with the one before it.
const (
	ChangeSlower        = "slower"         // latency up (throughput down) beyond noise: a regression
	ChangeFaster        = "faster"         // latency down beyond noise
	ChangeWinner        = "winner_changed" // another candidate won
	ChangeNewlyFailing  = "newly_failing"  // it had a winner before, now none: a regression
	ChangeRecovered     = "recovered"      // it failed before, now it has a winner
	ChangeNewGraph      = "new_graph"      // not in the previous entry
	ChangeRemovedGraph  = "removed_graph"  // in the previous entry, not in this one
	ChangeStillFailing  = "still_failing"  // failed before and now
	ChangePlatformMoved = "platform_moved" // the entries are of different platforms: timings not compared
	// ChangeSettings: the candidates, strategy, tolerances, bench settings
	// or toolchain differ from the previous entry's. The entry gets one
	// without a graph saying what differs, and a graph's move (slower,
	// faster, another winner, failing) is this kind too, Was naming what
	// it would have been: no regression, the settings' doing.
	ChangeSettings = "settings_changed"
	// ChangeNewVersion: the model's bundle changed (the entry gets one
	// without a graph saying what: its digest and the graphs whose files
	// or shapes changed), and each graph whose files or shapes changed gets
	// one too. A graph's figures are another version's, so its move is no
	// regression and no improvement: Was names what it would have been.
	ChangeNewVersion = "new_version"
	// ChangeRemeasured: the same version of a graph measured again rather
	// than reused (another bench time or warm-up, or --remeasure); its
	// moves are compared as usual under the same settings.
	ChangeRemeasured = "remeasured"
)

// Change is one thing that moved between two entries.
type Change struct {
	Graph      string `json:"graph,omitempty"`
	Kind       string `json:"kind"`
	Regression bool   `json:"regression"`
	Detail     string `json:"detail"`
	// Before and After are the measurements compared (slower/faster).
	Before *Bench `json:"before,omitempty"`
	After  *Bench `json:"after,omitempty"`
	// Was is, for a graph's settings_changed, the kind the move would
	// have had under the same settings (slower, newly_failing, …); for a
	// graph's new_version, the move its figures made (slower, faster).
	Was string `json:"was,omitempty"`
}

// NoiseSigmas is how many standard errors the mean per-sample latency
// must move by, as a log ratio, to count (see Moved).
const NoiseSigmas = 2

// MinMove is the smallest relative move of the mean that counts, whatever
// the standard errors: two nights on one machine differ by a few percent
// for reasons no measurement of either night shows (clocks, neighbours).
const MinMove = 0.05

// Moved decides whether a timing moved beyond measurement noise between
// two measurements, from their own recorded spread rather than a fixed
// percentage alone. Latencies are taken per sample (divided by the batch
// size), so measurements at different batch sizes compare. It answers +1
// (slower), -1 (faster) or 0 (within noise), and both conditions must
// hold:
//
//   - the means moved: |ln(mean2/mean1)| is more than NoiseSigmas
//     combined standard errors, 2·sqrt(cv1²/n1 + cv2²/n2) (the CV is the
//     call-to-call spread the stop rule measured over n calls; the mean of
//     n calls is known to cv/sqrt(n)), and more than MinMove; and
//   - the distributions do not overlap at the middle: when slower, the new
//     median is above the old p90 (nine old calls in ten were faster than
//     the new typical call); when faster, the new p90 is below the old
//     median.
//
// The second guards against a few slow calls moving a mean, the first
// against percentiles within a hair of each other (p50 = p90 on a
// quantized clock). The call-to-call CV itself is not the band: a long
// tail (a CV of 2 from a few slow calls in a hundred) would hide a tenfold
// slowdown.
func Moved(before, after *Bench) int {
	if before == nil || after == nil || before.BatchSize <= 0 || after.BatchSize <= 0 {
		return 0
	}
	if len(before.RoundMs) >= 2 && len(after.RoundMs) >= 2 {
		// The one noise rule (strategy.Compare, as winners are decided):
		// the interval of the ratio of the robust per-sample costs over
		// the rounds of the two measurements, beyond MinMove.
		return int(strategy.Compare(after.Stats(), before.Stats()).Move(MinMove))
	}
	b, a := float64(before.BatchSize), float64(after.BatchSize)
	m1, m2 := before.MeanMs/b, after.MeanMs/a
	if !(m1 > 0) || !(m2 > 0) {
		return 0
	}
	band := math.Max(NoiseSigmas*math.Hypot(before.CV/math.Sqrt(calls(before)), after.CV/math.Sqrt(calls(after))), math.Log1p(MinMove))
	r := math.Log(m2 / m1)
	switch {
	case r > band && after.P50Ms/a > before.P90Ms/b:
		return +1
	case r < -band && after.P90Ms/a < before.P50Ms/b:
		return -1
	}
	return 0
}

// calls is how many calls a measurement's CV is over (at least 1).
func calls(b *Bench) float64 { return math.Max(float64(b.Samples), 1) }

// Compare lists what changed from prev to cur, graph by graph, in cur's
// graph order (then graphs prev had and cur has not). prev nil (the first
// entry) has no changes. Regressions are graphs slower beyond noise (the
// same version of the graph, measured with the same settings) and graphs
// newly failing; a graph whose files or shapes changed is a new version
// (ChangeNewVersion), whatever its figures did. A change of winner is
// counted wherever it happens, in a new version or under new settings.
func Compare(prev, cur *Entry) []Change {
	if prev == nil || cur == nil {
		return nil
	}
	var out []Change
	timings := prev.Platform == cur.Platform
	if !timings {
		out = append(out, Change{Kind: ChangePlatformMoved, Detail: fmt.Sprintf("previous entry on %s, this one on %s: timings not compared", prev.Platform, cur.Platform)})
	}
	diff := SettingsDiff(prev.Settings, cur.Settings)
	if len(diff) > 0 {
		out = append(out, Change{Kind: ChangeSettings, Detail: strings.Join(diff, "; ") + " (since run " + prev.Run + ")"})
	}
	before := map[string]Graph{}
	for _, g := range prev.Graphs {
		before[g.Name] = g
	}
	if v := versionText(prev, cur, before); v != "" {
		out = append(out, Change{Kind: ChangeNewVersion, Detail: v})
	}
	seen := map[string]bool{}
	for _, g := range cur.Graphs {
		seen[g.Name] = true
		p, ok := before[g.Name]
		if !ok {
			out = append(out, Change{Graph: g.Name, Kind: ChangeNewGraph, Detail: "not in run " + prev.Run})
			continue
		}
		changed, what := graphVersion(prev, cur, p, g)
		if changed {
			out = append(out, newVersionChanges(p, g, what, timings)...)
			continue
		}
		if timings && g.Status == GraphDone && p.Status == GraphDone && !g.Reused && (cur.Remeasure || onlyBench(diff)) {
			out = append(out, Change{Graph: g.Name, Kind: ChangeRemeasured, Detail: remeasuredText(prev, cur, diff)})
		}
		for _, c := range compareGraph(p, g, timings, false) {
			if len(diff) > 0 && settingsMove[c.Kind] {
				c.Was, c.Kind, c.Regression = c.Kind, ChangeSettings, false
			}
			out = append(out, c)
		}
	}
	for _, g := range prev.Graphs {
		if !seen[g.Name] {
			out = append(out, Change{Graph: g.Name, Kind: ChangeRemovedGraph, Detail: "in run " + prev.Run + ", not in this one"})
		}
	}
	return out
}

// settingsMove are the kinds a change of settings explains. A change of
// winner is not among them: it is counted wherever it happens.
var settingsMove = map[string]bool{ChangeSlower: true, ChangeFaster: true, ChangeNewlyFailing: true}

// graphVersion reports whether graph g of cur is another version than p
// of prev, and what changed: its files or its shapes where both entries
// recorded them, else the bundle (entries written before graphs'
// digests were recorded).
func graphVersion(prev, cur *Entry, p, g Graph) (bool, []string) {
	var what []string
	if p.Digest != "" && g.Digest != "" {
		if p.Digest != g.Digest {
			what = append(what, "files "+shortDigest(p.Digest)+" → "+shortDigest(g.Digest))
		}
		if p.Shapes != g.Shapes && p.Shapes != "" && g.Shapes != "" {
			what = append(what, "shapes "+p.Shapes+" → "+g.Shapes)
		}
		return len(what) > 0, what
	}
	if prev.BundleDigest != cur.BundleDigest {
		return true, []string{"bundle " + shortDigest(prev.BundleDigest) + " → " + shortDigest(cur.BundleDigest)}
	}
	return false, nil
}

// newVersionChanges are a new version's changes of graph g: the version
// (its figures' move, if any, not a regression), a change of winner (the
// old winner's ties were another graph's: no tie excuses it), failing.
func newVersionChanges(p, g Graph, what []string, timings bool) []Change {
	v := Change{Graph: g.Name, Kind: ChangeNewVersion, Detail: strings.Join(what, "; ")}
	var out []Change
	for _, c := range compareGraph(p, g, timings, true) {
		switch c.Kind {
		case ChangeSlower, ChangeFaster:
			v.Was, v.Before, v.After = c.Kind, c.Before, c.After
			v.Detail += "; " + c.Detail + " (another version: not compared)"
		default:
			out = append(out, c)
		}
	}
	return append([]Change{v}, out...)
}

// versionText says what makes cur a new version of the model ("" for
// none): its bundle digest and the graphs whose files or shapes changed.
func versionText(prev, cur *Entry, before map[string]Graph) string {
	if prev.BundleDigest == cur.BundleDigest || prev.BundleDigest == "" || cur.BundleDigest == "" {
		return ""
	}
	text := "bundle " + shortDigest(prev.BundleDigest) + " → " + shortDigest(cur.BundleDigest)
	var graphs []string
	for _, g := range cur.Graphs {
		p, ok := before[g.Name]
		if !ok {
			graphs = append(graphs, g.Name+" (new)")
			continue
		}
		if changed, what := graphVersion(prev, cur, p, g); changed && (p.Digest != "" && g.Digest != "") {
			graphs = append(graphs, g.Name+" ("+strings.Join(what, ", ")+")")
		}
	}
	for _, p := range prev.Graphs {
		if !slices.ContainsFunc(cur.Graphs, func(g Graph) bool { return g.Name == p.Name }) {
			graphs = append(graphs, p.Name+" (removed)")
		}
	}
	if len(graphs) > 0 {
		text += "; graph " + strings.Join(graphs, ", graph ")
	}
	return text + " (since run " + prev.Run + ")"
}

// onlyBench reports whether a settings diff is of the bench settings
// alone: the work is the same (a change of candidates, strategy or
// tolerances is other work, tuned anew), measured otherwise.
func onlyBench(diff []string) bool {
	return len(diff) > 0 && !slices.ContainsFunc(diff, func(d string) bool { return !strings.HasPrefix(d, benchDiff) })
}

// remeasuredText says that a graph is the same version as in prev,
// measured again, and why.
func remeasuredText(prev, cur *Entry, diff []string) string {
	why := "--remeasure"
	if onlyBench(diff) {
		why = strings.Join(diff, "; ")
	}
	return "same version, measured again (" + why + "; since run " + prev.Run + ")"
}

// shortDigest cuts a digest ("sha256:<64 hex>") for a message.
func shortDigest(d string) string {
	if i := strings.IndexByte(d, ':'); i >= 0 && len(d) > i+1+12 {
		return d[:i+1+12]
	}
	return d
}

// compareGraph lists graph g's changes since p; newVersion: g is another
// version, whose winner is compared with p's regardless of p's ties.
func compareGraph(p, g Graph, timings, newVersion bool) []Change {
	switch {
	case p.Status == GraphDone && g.Status == GraphFailed:
		return []Change{{Graph: g.Name, Kind: ChangeNewlyFailing, Regression: true, Detail: fmt.Sprintf("was %s, now fails: %s", p.Candidate, failureText(g))}}
	case p.Status == GraphFailed && g.Status == GraphFailed:
		return []Change{{Graph: g.Name, Kind: ChangeStillFailing, Detail: failureText(g)}}
	case p.Status == GraphFailed && g.Status == GraphDone:
		return []Change{{Graph: g.Name, Kind: ChangeRecovered, Detail: fmt.Sprintf("failed before (%s), now %s", failureText(p), g.Candidate)}}
	}
	var out []Change
	// A change of winner among candidates that tied within noise (in
	// either entry) is the tie-break at work on noise, not a change.
	if p.Candidate != g.Candidate && (newVersion || !tiedWith(p, g.Candidate) && !tiedWith(g, p.Candidate)) {
		out = append(out, Change{Graph: g.Name, Kind: ChangeWinner, Detail: p.Candidate + " → " + g.Candidate})
	}
	if !timings {
		return out
	}
	switch Moved(p.Bench, g.Bench) {
	case +1:
		out = append(out, Change{Graph: g.Name, Kind: ChangeSlower, Regression: true, Detail: movedText(p.Bench, g.Bench), Before: p.Bench, After: g.Bench})
	case -1:
		out = append(out, Change{Graph: g.Name, Kind: ChangeFaster, Detail: movedText(p.Bench, g.Bench), Before: p.Bench, After: g.Bench})
	}
	return out
}

// tiedWith reports whether g's winner tied with candidate.
func tiedWith(g Graph, candidate string) bool { return slices.Contains(g.Tied, candidate) }

func failureText(g Graph) string {
	if g.Failure == nil {
		return "no engine"
	}
	return fmt.Sprintf("%s: %s", g.Failure.Class, firstLine(g.Failure.Message))
}

func movedText(b, a *Bench) string {
	return fmt.Sprintf("throughput %s%s → %s%s/s (%+.1f%%), p50 %s → %s ms, p90 %s → %s ms at batch %d → %d (cv %.3f, %.3f)%s",
		backend.Human(b.Throughput), UnstableMark(b), backend.Human(a.Throughput), UnstableMark(a), 100*(a.Throughput/b.Throughput-1),
		backend.Human(b.P50Ms), backend.Human(a.P50Ms), backend.Human(b.P90Ms), backend.Human(a.P90Ms), b.BatchSize, a.BatchSize, b.CV, a.CV, unstableText(b, a))
}

// Unstable is the mark a figure from an unstable measurement (its stop
// rule never saw a window within max_cv) carries in tables and texts.
const Unstable = "~"

// UnstableMark is Unstable for an unstable measurement, else "".
func UnstableMark(b *Bench) string {
	if b != nil && !b.Stable {
		return Unstable
	}
	return ""
}

// unstableText says which side of a comparison was unstable: such a move
// may be noise the CV band did not catch.
func unstableText(b, a *Bench) string {
	switch {
	case !b.Stable && !a.Stable:
		return ", both unstable"
	case !b.Stable:
		return ", before unstable"
	case !a.Stable:
		return ", now unstable"
	}
	return ""
}

func firstLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

// Regressions counts the regressions among changes.
func Regressions(changes []Change) int {
	n := 0
	for _, c := range changes {
		if c.Regression {
			n++
		}
	}
	return n
}
