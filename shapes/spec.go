package shapes

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Axis is one axis of a labelled shape: a static size, or a label
// "batch<i>" (a batch axis) or "dim<i>" (any other dynamic axis), where i is
// the axis index, as AITune's TensorSpec.shape writes them.
type Axis struct {
	Size  int64  // static size; meaningful when Label is empty
	Label string // "batch<i>" or "dim<i>"; empty for a static axis
}

// Static returns a static axis of size n.
func Static(n int64) Axis { return Axis{Size: n} }

// BatchAxis returns the label of a batch axis at index i.
func BatchAxis(i int) Axis { return Axis{Label: "batch" + strconv.Itoa(i)} }

// DynAxis returns the label of a dynamic, non-batch axis at index i.
func DynAxis(i int) Axis { return Axis{Label: "dim" + strconv.Itoa(i)} }

// IsStatic reports whether the axis has a fixed size.
func (a Axis) IsStatic() bool { return a.Label == "" }

// IsBatch reports whether the axis is a batch axis.
func (a Axis) IsBatch() bool { return strings.HasPrefix(a.Label, "batch") }

// String renders the axis as it appears in bundle.json and in messages.
func (a Axis) String() string {
	if a.IsStatic() {
		return strconv.FormatInt(a.Size, 10)
	}
	return a.Label
}

// MarshalJSON writes a static axis as a number and a labelled one as a string.
func (a Axis) MarshalJSON() ([]byte, error) {
	if a.IsStatic() {
		return []byte(strconv.FormatInt(a.Size, 10)), nil
	}
	return json.Marshal(a.Label)
}

// UnmarshalJSON accepts a non-negative integer or a "batch<i>"/"dim<i>" label.
func (a *Axis) UnmarshalJSON(b []byte) error {
	var n int64
	if err := json.Unmarshal(b, &n); err == nil {
		if n < 0 {
			return fmt.Errorf("axis size %d is negative", n)
		}
		*a = Axis{Size: n}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("axis must be an integer or a label such as \"batch0\" or \"dim1\", got %s", b)
	}
	if s == "" {
		return fmt.Errorf("axis label is empty: want an integer or a label such as \"batch0\" or \"dim1\"")
	}
	*a = Axis{Label: s}
	return nil
}

// labelIndex parses the axis index out of a label; ok is false when the
// label is neither "batch<i>" nor "dim<i>".
func (a Axis) labelIndex() (int, bool) {
	var rest string
	switch {
	case strings.HasPrefix(a.Label, "batch"):
		rest = strings.TrimPrefix(a.Label, "batch")
	case strings.HasPrefix(a.Label, "dim"):
		rest = strings.TrimPrefix(a.Label, "dim")
	default:
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || strconv.Itoa(i) != rest {
		return 0, false
	}
	return i, true
}

// TensorSpec describes one input or output tensor of a graph spec: its
// labelled shape and the smallest and largest sizes seen (or allowed) per
// axis. Opt is optional; when empty the profile's opt is Max, as in AITune.
type TensorSpec struct {
	Name  string  `json:"name"`
	Shape []Axis  `json:"shape"`
	Min   []int64 `json:"min_shape"`
	Max   []int64 `json:"max_shape"`
	Opt   []int64 `json:"opt_shape,omitempty"`
}

// Rank is the number of axes.
func (t TensorSpec) Rank() int { return len(t.Shape) }

// FormatShape renders a concrete shape as "1x3x224x224" (the trtexec and CLI
// form); a rank-0 shape is "scalar".
func FormatShape(s []int64) string {
	if len(s) == 0 {
		return "scalar"
	}
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.FormatInt(v, 10)
	}
	return strings.Join(parts, "x")
}

// ParseShape reads "1x3x224x224" (or "scalar" for rank 0).
func ParseShape(s string) ([]int64, error) {
	if s == "scalar" {
		return []int64{}, nil
	}
	if s == "" {
		return nil, fmt.Errorf("empty shape (write sizes joined by 'x', e.g. 1x3x224x224)")
	}
	parts := strings.Split(s, "x")
	out := make([]int64, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("shape %q: %q is not a non-negative integer", s, p)
		}
		out[i] = v
	}
	return out, nil
}
