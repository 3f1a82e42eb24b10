package targetclass

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/internal/suggest"
	"github.com/tunefleet/tunefleet/runstate"
)

// Env is the environment variable that declares the deployment's classes
// (comma-separated), set by the deploy manifests' ConfigMap
// tunefleet-classes for every producer command.
const Env = "TUNEFLEET_CLASSES"

// LiveWindow is how recently a worker must have registered to count as
// live: three heartbeats (jobs.DefaultHeartbeat is 30 s), so one slow beat
// does not make a class look empty.
const LiveWindow = 90 * time.Second

// CPU is always declared: it is submit's default --target, the class a
// worker without a GPU serves (gpu.ClassCPU) and the embedded pipeline's,
// so it is declared by the tool itself and never a typo; typos of it
// (cpus) are still refused with it suggested. docs/cli-grammar.md ("Why
// cpu is always declared") gives the reasons for keeping it implicit.
const CPU = "cpu"

// ParseList splits a comma-separated list of classes, dropping blanks and
// repeats.
func ParseList(s string) []string {
	var out []string
	for _, c := range strings.Split(s, ",") {
		if c = strings.TrimSpace(c); c != "" && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// FromEnv are the classes TUNEFLEET_CLASSES declares, given the lookup
// (os.Getenv).
func FromEnv(getenv func(string) string) []string { return ParseList(getenv(Env)) }

// Verdict is what the rule says of one class.
type Verdict struct {
	Class    string
	Declared bool      // declared ahead of any worker
	Known    bool      // some worker served it once
	LastSeen time.Time // its last heartbeat; zero: never, or not recorded
	Live     bool      // a worker registered within LiveWindow
}

// Waiting says, for an accepted class with no live worker, what the runs
// on it wait for; "" when a worker is live.
func (v Verdict) Waiting() string {
	if v.Live {
		return ""
	}
	seen := "never seen"
	switch {
	case !v.LastSeen.IsZero():
		seen = "last seen " + v.LastSeen.UTC().Format(time.RFC3339)
	case v.Known:
		seen = "last seen at an unrecorded time"
	}
	return fmt.Sprintf("waiting for a worker of class %s (none live; %s)", v.Class, seen)
}

// Wait is what the runs on a class with no live worker wait for, as
// `status -o json` shows it (waiting_for_class).
type Wait struct {
	Class string `json:"class"`
	// LastSeen is the last heartbeat of a worker of the class; absent
	// when none was ever seen (or it was not recorded).
	LastSeen     time.Time `json:"last_seen,omitzero"`
	ServedBefore bool      `json:"served_before"` // some worker served it once
	Declared     bool      `json:"declared"`      // declared ahead of its workers
	// Message is Verdict.Waiting: "waiting for a worker of class X (none
	// live; last seen …)".
	Message string `json:"message"`
}

// Wait is what runs on the class wait for; nil when a worker is live.
func (v Verdict) Wait() *Wait {
	if v.Live {
		return nil
	}
	return &Wait{Class: v.Class, LastSeen: v.LastSeen, ServedBefore: v.Known, Declared: v.Declared, Message: v.Waiting()}
}

// WaitOf reads the registry and says what runs already submitted on class
// wait for: nil when a worker of it is live. Such a run waits whether or
// not the rule would accept the class today (its declaration may have
// gone), so a refusal is not an error here.
func WaitOf(ctx context.Context, rdb redis.UniversalClient, class string, declared []string) (*Wait, error) {
	reg, err := Load(ctx, rdb, declared)
	if err != nil {
		return nil, err
	}
	v, _ := reg.Judge(class)
	return v.Wait(), nil
}

// Registry is the view of the classes the rule judges against.
type Registry struct {
	Declared []string
	Seen     map[string]time.Time // runstate.ClassesSeen
	Now      time.Time
}

// Load reads the registry; declared are the classes declared by the caller.
func Load(ctx context.Context, rdb redis.UniversalClient, declared []string) (*Registry, error) {
	seen, err := runstate.ClassesSeen(ctx, rdb)
	if err != nil {
		return nil, err
	}
	return &Registry{Declared: declared, Seen: seen, Now: time.Now()}, nil
}

// Judge applies the rule to class: a *RefusedError when it is neither
// declared nor known.
func (r *Registry) Judge(class string) (Verdict, error) {
	last, known := r.Seen[class]
	v := Verdict{Class: class, Declared: class == CPU || slices.Contains(r.Declared, class), Known: known, LastSeen: last}
	v.Live = known && !last.IsZero() && r.Now.Sub(last) <= LiveWindow
	if !v.Declared && !v.Known {
		return v, &RefusedError{Class: class, Known: r.Classes()}
	}
	return v, nil
}

// Classes are every class declared or served, sorted.
func (r *Registry) Classes() []string {
	out := append([]string{CPU}, r.Declared...)
	for c := range r.Seen {
		out = append(out, c)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// RefusedError is a class neither declared nor ever served: most likely a
// typo, whose tasks no worker would ever take.
type RefusedError struct {
	Class string
	Known []string
}

func (e *RefusedError) Error() string {
	cut := e.Class
	if len(cut) > 100 {
		cut = cut[:100] + "…"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "target class %q: no worker has served it and it is not declared", cut)
	if s := Suggest(e.Class, e.Known); s != "" {
		fmt.Fprintf(&b, "; did you mean %s?", s)
	}
	if len(e.Known) == 0 {
		b.WriteString(" (no class is known yet")
	} else {
		fmt.Fprintf(&b, " (known classes: %s", strings.Join(e.Known, ", "))
	}
	fmt.Fprintf(&b, "; declare a class ahead of its workers with %s, a fleet file's classes: or submit --allow-unserved)", Env)
	return b.String()
}

// Suggest is the known class closest to class by edit distance, when it
// is close enough to be a typo (package suggest's rule); "" otherwise.
// Classes are at most 64 characters: a name over 128 is no typo of one.
func Suggest(class string, known []string) string { return suggest.Closest(class, known, 128) }
