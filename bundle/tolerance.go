package bundle

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// ToleranceOverride sets the correctness check's atol or rtol of one output
// (Output names it) or of every floating-point output of every graph
// (Output empty): what `--atol [OUTPUT=]VALUE` and `--rtol` say.
type ToleranceOverride struct {
	Output string
	RTol   bool // false: the override is an atol
	Value  float64
}

// String is the flag form, e.g. "--atol logits=0.001".
func (o ToleranceOverride) String() string {
	flag := o.flag()
	v := strconv.FormatFloat(o.Value, 'g', -1, 64)
	if o.Output == "" {
		return flag + " " + v
	}
	return flag + " " + o.Output + "=" + v
}

func (o ToleranceOverride) flag() string {
	if o.RTol {
		return "--rtol"
	}
	return "--atol"
}

// ParseToleranceOverride reads a flag value "[OUTPUT=]VALUE" (rtol says
// which flag it came from). The name is everything before the last '=', so
// names containing '=' work.
func ParseToleranceOverride(s string, rtol bool) (ToleranceOverride, error) {
	o := ToleranceOverride{RTol: rtol}
	flag := o.flag()
	v := s
	if i := strings.LastIndex(s, "="); i >= 0 {
		o.Output, v = s[:i], s[i+1:]
		if o.Output == "" {
			return o, fmt.Errorf("%s %q: the output name before '=' is empty; write %s VALUE for every output", flag, s, flag)
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return o, fmt.Errorf("%s %q: %q is not a finite non-negative number (write [OUTPUT=]VALUE, e.g. 1e-3 or logits=1e-3)", flag, s, v)
	}
	o.Value = f
	return o, nil
}

// ApplyTolerances writes overrides into the graphs' tolerances: those
// without an output name first (every floating-point output of every
// graph), then the named ones, so a named override wins whatever the flag
// order. A name that is no graph's output is an error naming the outputs.
func ApplyTolerances(m *Manifest, overrides []ToleranceOverride) error {
	ordered := append([]ToleranceOverride{}, overrides...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].Output == "" && ordered[j].Output != "" })
	for _, o := range ordered {
		found := false
		for gi := range m.Graphs {
			g := &m.Graphs[gi]
			for _, d := range g.Outputs {
				if (o.Output == "" && d.DType.IsFloat()) || o.Output == d.Name {
					found = true
					if g.Tolerances == nil {
						g.Tolerances = map[string]Tolerance{}
					}
					t := g.Tolerances[d.Name]
					v := o.Value
					if o.RTol {
						t.RTol = &v
					} else {
						t.ATol = &v
					}
					g.Tolerances[d.Name] = t
				}
			}
		}
		if !found && o.Output != "" {
			return fmt.Errorf("%s: %q is not an output of any graph (outputs: %s)", o, o.Output, strings.Join(outputNames(m), ", "))
		}
	}
	return nil
}

func outputNames(m *Manifest) []string {
	var out []string
	seen := map[string]bool{}
	for _, g := range m.Graphs {
		for _, d := range g.Outputs {
			if !seen[d.Name] {
				seen[d.Name] = true
				out = append(out, d.Name)
			}
		}
	}
	return out
}
