package shapes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// Dim is one axis of an explicit dynamic shape (AITune's dynamic_shapes):
// a static size, or a named dynamic dim with bounds (DynamicDim), or a named
// batch dim (BatchDim). Explicit dims take precedence over recorded bounds
// when profiles and batch sizes are derived.
type Dim struct {
	Size  int64  `json:"-"`
	Name  string `json:"name"`
	Min   int64  `json:"min"`
	Opt   int64  `json:"opt,omitempty"` // 0 = Max, as AITune defaults it
	Max   int64  `json:"max"`
	Batch bool   `json:"batch,omitempty"`
}

// IsStatic reports whether the dim is a fixed size.
func (d Dim) IsStatic() bool { return d.Name == "" }

// OptOrMax is the profile's opt size of a dynamic dim.
func (d Dim) OptOrMax() int64 {
	if d.Opt == 0 {
		return d.Max
	}
	return d.Opt
}

// MarshalJSON writes a static dim as a number.
func (d Dim) MarshalJSON() ([]byte, error) {
	if d.IsStatic() {
		return json.Marshal(d.Size)
	}
	type plain Dim
	return json.Marshal(plain(d))
}

// UnmarshalJSON reads a number or an object {"name","min","max","opt","batch"}.
func (d *Dim) UnmarshalJSON(b []byte) error {
	var n int64
	if err := json.Unmarshal(b, &n); err == nil {
		*d = Dim{Size: n}
		return nil
	}
	type plain Dim
	var p plain
	// Strict like bundle.json as a whole: a misspelt key ("bacth") is an
	// error, not silently dropped.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("dim must be an integer or {\"name\",\"min\",\"max\",\"opt\",\"batch\"}: %w", err)
	}
	if p.Name == "" {
		return fmt.Errorf("dynamic dim needs a non-empty \"name\"")
	}
	*d = Dim(p)
	return nil
}

// DynamicShapes maps an input tensor name to its explicit dims.
type DynamicShapes map[string][]Dim

// Validate applies AITune's rules: static sizes ≥ 0; dynamic dims with
// 0 < min < max and min ≤ opt ≤ max; dims sharing a name are identical.
func (ds DynamicShapes) Validate() error {
	byName := map[string]Dim{}
	names := make([]string, 0, len(ds))
	for n := range ds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, input := range names {
		for i, d := range ds[input] {
			where := fmt.Sprintf("dynamic_shapes[%q][%d]", input, i)
			if d.IsStatic() {
				if d.Size < 0 {
					return fmt.Errorf("%s: size %d is negative", where, d.Size)
				}
				if err := checkDim(where+" size", d.Size); err != nil {
					return err
				}
				continue
			}
			if err := checkDim(fmt.Sprintf("%s (%s) max", where, d.Name), max(d.Max, d.Opt)); err != nil {
				return err
			}
			if d.Min <= 0 || d.Max <= 0 || (d.Opt != 0 && d.Opt < 0) {
				return fmt.Errorf("%s (%s): min, opt and max must be positive", where, d.Name)
			}
			if d.Min >= d.Max {
				return fmt.Errorf("%s (%s): min %d must be below max %d", where, d.Name, d.Min, d.Max)
			}
			if o := d.OptOrMax(); o < d.Min || o > d.Max {
				return fmt.Errorf("%s (%s): opt %d is outside [%d, %d]", where, d.Name, o, d.Min, d.Max)
			}
			if prev, ok := byName[d.Name]; ok && prev != d {
				return fmt.Errorf("%s: dim %q is declared twice with different bounds", where, d.Name)
			}
			byName[d.Name] = d
		}
	}
	return nil
}
