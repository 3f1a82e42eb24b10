package shapes

import (
	"fmt"
	"strings"
)

// InputProfile is the min/opt/max shape of one input in an optimization
// profile.
type InputProfile struct {
	Name string  `json:"name"`
	Min  []int64 `json:"min"`
	Opt  []int64 `json:"opt"`
	Max  []int64 `json:"max"`
}

// Profile is one optimization profile: min/opt/max per input, in input order.
type Profile struct {
	Inputs []InputProfile `json:"inputs"`
}

// Input returns the profile of the named input.
func (p Profile) Input(name string) (InputProfile, bool) {
	for _, ip := range p.Inputs {
		if ip.Name == name {
			return ip, true
		}
	}
	return InputProfile{}, false
}

// Contains checks that a concrete shape lies within the input's profile.
func (ip InputProfile) Contains(shape []int64) error {
	if len(shape) != len(ip.Min) {
		return fmt.Errorf("input %q: rank %d, profile has rank %d", ip.Name, len(shape), len(ip.Min))
	}
	for i, v := range shape {
		if v < ip.Min[i] || v > ip.Max[i] {
			return fmt.Errorf("input %q: axis %d size %d is outside the profile's [%d, %d] (shape %s, profile min %s max %s)",
				ip.Name, i, v, ip.Min[i], ip.Max[i], FormatShape(shape), FormatShape(ip.Min), FormatShape(ip.Max))
		}
	}
	return nil
}

// DeriveProfile builds the profile AITune would: for an input with explicit
// dims, per axis a static size v gives (v, v, v) and a dynamic dim gives
// (min, opt or max, max); otherwise (min_shape, opt_shape or max_shape,
// max_shape) from the recorded spec.
func DeriveProfile(inputs []TensorSpec, explicit DynamicShapes) (Profile, error) {
	if err := explicit.Validate(); err != nil {
		return Profile{}, err
	}
	known := map[string]bool{}
	var p Profile
	for _, in := range inputs {
		known[in.Name] = true
		if err := ValidateSpec(in); err != nil {
			return Profile{}, err
		}
		if dims, ok := explicit[in.Name]; ok {
			if len(dims) != in.Rank() {
				return Profile{}, fmt.Errorf("input %q: dynamic_shapes has %d dims, the tensor has rank %d", in.Name, len(dims), in.Rank())
			}
			ip := InputProfile{Name: in.Name}
			for _, d := range dims {
				if d.IsStatic() {
					ip.Min, ip.Opt, ip.Max = append(ip.Min, d.Size), append(ip.Opt, d.Size), append(ip.Max, d.Size)
					continue
				}
				ip.Min, ip.Opt, ip.Max = append(ip.Min, d.Min), append(ip.Opt, d.OptOrMax()), append(ip.Max, d.Max)
			}
			p.Inputs = append(p.Inputs, ip)
			continue
		}
		opt := in.Opt
		if len(opt) == 0 {
			opt = in.Max
		}
		p.Inputs = append(p.Inputs, InputProfile{Name: in.Name, Min: clone(in.Min), Opt: clone(opt), Max: clone(in.Max)})
	}
	for name := range explicit {
		if !known[name] {
			return Profile{}, fmt.Errorf("dynamic_shapes names %q, which is not an input of the graph", name)
		}
	}
	return p, nil
}

// ValidateSpec checks that a tensor spec is consistent: shape, min and max
// (and opt, if given) have the same rank, min ≤ opt ≤ max, static axes have
// min = max = size, and labels carry their own axis index.
func ValidateSpec(t TensorSpec) error {
	r := t.Rank()
	if len(t.Min) != r || len(t.Max) != r {
		return fmt.Errorf("tensor %q: shape has rank %d but min_shape has %d and max_shape %d", t.Name, r, len(t.Min), len(t.Max))
	}
	if len(t.Opt) != 0 && len(t.Opt) != r {
		return fmt.Errorf("tensor %q: opt_shape has rank %d, want %d", t.Name, len(t.Opt), r)
	}
	for i, a := range t.Shape {
		lo, hi := t.Min[i], t.Max[i]
		if err := checkDim(fmt.Sprintf("tensor %q: axis %d max", t.Name, i), hi); err != nil {
			return err
		}
		if lo < 0 || lo > hi {
			return fmt.Errorf("tensor %q: axis %d has min %d and max %d (want 0 ≤ min ≤ max)", t.Name, i, lo, hi)
		}
		if len(t.Opt) != 0 && (t.Opt[i] < lo || t.Opt[i] > hi) {
			return fmt.Errorf("tensor %q: axis %d opt %d is outside [%d, %d]", t.Name, i, t.Opt[i], lo, hi)
		}
		if a.IsStatic() {
			if lo != a.Size || hi != a.Size {
				return fmt.Errorf("tensor %q: static axis %d of size %d has min %d and max %d", t.Name, i, a.Size, lo, hi)
			}
			continue
		}
		idx, ok := a.labelIndex()
		if !ok {
			return fmt.Errorf("tensor %q: axis %d label %q is not \"batch%d\" or \"dim%d\"", t.Name, i, a.Label, i, i)
		}
		if idx != i {
			return fmt.Errorf("tensor %q: axis %d is labelled %q; labels carry their own axis index (\"%s%d\")", t.Name, i, a.Label, strings.TrimRight(a.Label, "0123456789"), i)
		}
	}
	return nil
}

// Fits checks that a concrete sample shape agrees with a spec: same rank,
// static axes equal, every axis within [min, max].
func (t TensorSpec) Fits(shape []int64) error {
	if len(shape) != t.Rank() {
		return fmt.Errorf("tensor %q: sample has rank %d (shape %s), the spec has rank %d", t.Name, len(shape), FormatShape(shape), t.Rank())
	}
	for i, v := range shape {
		if v < t.Min[i] || v > t.Max[i] {
			return fmt.Errorf("tensor %q: sample axis %d is %d, outside the spec's [%d, %d] (sample shape %s)", t.Name, i, v, t.Min[i], t.Max[i], FormatShape(shape))
		}
	}
	return nil
}

func clone(s []int64) []int64 { return append([]int64{}, s...) }
