package aitune

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
)

// TensorRT optimization profiles as AITune derives and stores them.

// trtProfiles returns the profiles to save for a TensorRT graph: the given
// ones, checked, or the single one AITune would derive.
//
// A graph with explicit dynamic shapes has exactly the one profile AITune
// builds from them: TensorRTBackend.get_profiles rejects user profiles
// combined with dynamic shapes, so AITune never saves any other, and a
// call the shapes allow but the saved profiles do not would fail at
// inference ("No TensorRT optimization profile matches").
func trtProfiles(bg *BlockGraph, g Graph) ([]shapes.Profile, error) {
	explicit := shapes.DynamicShapes{}
	for _, t := range bg.Inputs {
		if dims, ok := bg.dimsFor(t); ok {
			explicit[t.Name] = toShapesDims(dims)
		}
	}
	derived, err := shapes.DeriveProfile(bundle.Specs(g.Decl.Inputs), explicit)
	if err != nil {
		return nil, err
	}
	if g.Profiles == nil {
		return []shapes.Profile{derived}, nil
	}
	if len(g.Profiles) == 0 {
		return nil, errors.New("Profiles is empty (nil derives AITune's single profile)")
	}
	for i, p := range g.Profiles {
		if len(p.Inputs) != len(g.Decl.Inputs) {
			return nil, fmt.Errorf("profile %d has %d inputs, the graph %d (TensorRT profiles name every input)", i, len(p.Inputs), len(g.Decl.Inputs))
		}
		for _, ip := range p.Inputs {
			d, ok := findDecl(g.Decl.Inputs, ip.Name)
			if !ok {
				return nil, fmt.Errorf("profile %d names %q, which is not an input", i, ip.Name)
			}
			if len(ip.Min) != d.Rank() || len(ip.Opt) != d.Rank() || len(ip.Max) != d.Rank() {
				return nil, fmt.Errorf("profile %d input %q: min/opt/max must have rank %d", i, ip.Name, d.Rank())
			}
			for a := range ip.Min {
				if ip.Min[a] < 0 || ip.Min[a] > ip.Opt[a] || ip.Opt[a] > ip.Max[a] {
					return nil, fmt.Errorf("profile %d input %q axis %d: want 0 ≤ min ≤ opt ≤ max, got %d, %d, %d", i, ip.Name, a, ip.Min[a], ip.Opt[a], ip.Max[a])
				}
			}
		}
	}
	if len(explicit) > 0 && (len(g.Profiles) != 1 || !sameProfile(g.Profiles[0], derived)) {
		return nil, fmt.Errorf("%s the graph's dynamic shapes: AITune builds exactly one profile from them, %s, and rejects user profiles with dynamic shapes (leave Profiles nil to write it)",
			profilesString(g.Profiles), profileString(derived))
	}
	return g.Profiles, nil
}

// sameProfile compares two profiles input by input, whatever their order.
func sameProfile(a, b shapes.Profile) bool {
	if len(a.Inputs) != len(b.Inputs) {
		return false
	}
	for _, x := range a.Inputs {
		i := slices.IndexFunc(b.Inputs, func(y shapes.InputProfile) bool { return y.Name == x.Name })
		if i < 0 || !slices.Equal(x.Min, b.Inputs[i].Min) || !slices.Equal(x.Opt, b.Inputs[i].Opt) || !slices.Equal(x.Max, b.Inputs[i].Max) {
			return false
		}
	}
	return true
}

func profileString(p shapes.Profile) string {
	parts := make([]string, len(p.Inputs))
	for i, ip := range p.Inputs {
		parts[i] = fmt.Sprintf("%s min %v opt %v max %v", ip.Name, ip.Min, ip.Opt, ip.Max)
	}
	return "{" + strings.Join(parts, "; ") + "}"
}

func profilesString(ps []shapes.Profile) string {
	if len(ps) == 1 {
		return "the given profile " + profileString(ps[0]) + " contradicts"
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = profileString(p)
	}
	return fmt.Sprintf("the %d given profiles %s contradict", len(ps), strings.Join(parts, ", "))
}

func toShapesDims(ds []Dim) []shapes.Dim {
	out := make([]shapes.Dim, len(ds))
	for i, d := range ds {
		out[i] = shapes.Dim{Size: d.Size, Name: d.Name, Min: d.Min, Max: d.Max, Batch: d.Batch}
		if d.Opt != nil {
			out[i].Opt = *d.Opt
		}
	}
	return out
}

// profilesJSON writes profiles as TensorRTBackend saves them: json.dump of
// a list with one {input name: [min, opt, max]} object per profile, with
// Python's default separators and no trailing newline.
func profilesJSON(ps []shapes.Profile) []byte {
	var b bytes.Buffer
	ints := func(s []int64) {
		b.WriteByte('[')
		for i, v := range s {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.FormatInt(v, 10))
		}
		b.WriteByte(']')
	}
	b.WriteByte('[')
	for i, p := range ps {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('{')
		for j, ip := range p.Inputs {
			if j > 0 {
				b.WriteString(", ")
			}
			// Names follow the naming contract: [A-Za-z0-9_] only, no
			// escaping needed.
			b.WriteString(strconv.Quote(ip.Name) + ": [")
			ints(ip.Min)
			b.WriteString(", ")
			ints(ip.Opt)
			b.WriteString(", ")
			ints(ip.Max)
			b.WriteByte(']')
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.Bytes()
}
