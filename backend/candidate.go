package backend

import (
	"fmt"
	"sort"
	"strings"
)

// Candidate is one backend configuration to try, written as
// "backend:positional:...:key=value", e.g. "ort:cpu:extended:threads=1" or
// "trt:fp16:opt=5". The generic parser only splits the string; each backend
// interprets (and rejects) its own positionals and options.
type Candidate struct {
	Backend     string            // "ort", "trt"
	Positionals []string          // e.g. ["cpu", "extended"]
	Options     map[string]string // e.g. {"threads": "1"}
}

// ParseCandidate splits a candidate string. It checks syntax only.
func ParseCandidate(s string) (Candidate, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Candidate{}, fmt.Errorf("empty candidate (write e.g. ort:cpu:basic)")
	}
	parts := strings.Split(s, ":")
	c := Candidate{Backend: parts[0], Options: map[string]string{}}
	if !isWord(c.Backend) {
		return Candidate{}, fmt.Errorf("candidate %q: backend name %q must be letters and digits", s, c.Backend)
	}
	for _, p := range parts[1:] {
		if k, v, ok := strings.Cut(p, "="); ok {
			if !isWord(k) || v == "" {
				return Candidate{}, fmt.Errorf("candidate %q: option %q must be key=value", s, p)
			}
			if _, dup := c.Options[k]; dup {
				return Candidate{}, fmt.Errorf("candidate %q: option %q given twice", s, k)
			}
			c.Options[k] = v
			continue
		}
		if len(c.Options) > 0 {
			return Candidate{}, fmt.Errorf("candidate %q: %q comes after a key=value option; put positional parts first", s, p)
		}
		if !isWord(p) {
			return Candidate{}, fmt.Errorf("candidate %q: part %q must be letters, digits, '-', '_' or '.'", s, p)
		}
		c.Positionals = append(c.Positionals, p)
	}
	return c, nil
}

// ParseCandidates parses a comma-separated list, rejecting duplicates.
func ParseCandidates(list string) ([]Candidate, error) {
	var out []Candidate
	seen := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		c, err := ParseCandidate(s)
		if err != nil {
			return nil, err
		}
		if seen[c.String()] {
			return nil, fmt.Errorf("candidate %q is listed twice", c)
		}
		seen[c.String()] = true
		out = append(out, c)
	}
	return out, nil
}

// String renders the candidate canonically: positionals in order, options
// sorted by key.
func (c Candidate) String() string {
	parts := append([]string{c.Backend}, c.Positionals...)
	keys := make([]string, 0, len(c.Options))
	for k := range c.Options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+c.Options[k])
	}
	return strings.Join(parts, ":")
}

// MarshalText makes a Candidate appear as its string in JSON.
func (c Candidate) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText parses a candidate string.
func (c *Candidate) UnmarshalText(b []byte) error {
	p, err := ParseCandidate(string(b))
	if err != nil {
		return err
	}
	*c = p
	return nil
}

func isWord(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}
