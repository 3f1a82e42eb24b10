package aitune_test

import (
	"encoding/json"
	"testing"

	. "github.com/tunefleet/tunefleet/aitune"
)

var nameCases = []struct {
	path   []Key
	prefix string
	want   string
}{
	// The examples of reference §2.1.
	{[]Key{Name("x")}, "input", "input_x"},
	{[]Key{Name("input_ids")}, "input", "input_input_ids"},
	{[]Key{Name("options"), Name("mask")}, "input", "input_options_mask"},
	{[]Key{Name("items"), Index(0)}, "input", "input_items_0"},
	{nil, "output", "output"},
	{[]Key{Index(0)}, "output", "output_0"},
	{[]Key{Index(0), Name("a")}, "output", "output_0_a"},
	{[]Key{Name("_x")}, "input", "input_x"},
	// Beyond the examples: what repr() puts in and the regex keeps.
	{[]Key{Name("args"), Index(1)}, "input", "input_args_1"},
	{[]Key{Name("kwargs"), Name("k")}, "input", "input_kwargs_k"},
	{[]Key{Name("a-b.c")}, "input", "input_a_b_c"},
	{[]Key{Name("a\tb")}, "input", "input_a_tb"},
	{[]Key{Name("a\nb")}, "input", "input_a_nb"},
	{[]Key{Name("a\x01b")}, "input", "input_a_x01b"},
	{[]Key{Name("it's")}, "input", "input_it_s"},
	{[]Key{Name(`a\b`)}, "input", "input_a_b"},
	{[]Key{Name("héllo")}, "input", "input_h_llo"},
	{[]Key{Name("a\u200bb")}, "input", "input_a_u200bb"},
	{[]Key{Name("a\u00a0b")}, "input", "input_a_xa0b"},
	{[]Key{Index(-3)}, "output", "output_3"},
	{[]Key{Name("0")}, "output", "output_0"},
	{[]Key{Name("logits")}, "output", "output_logits"},
	{[]Key{Name("x"), Index(0), Name("y"), Index(12)}, "input", "input_x_0_y_12"},
	{[]Key{Name("__")}, "input", "input_"}, // an all-underscore key strips to nothing
}

func TestFormatTensorName(t *testing.T) {
	for _, c := range nameCases {
		if got := FormatTensorName(c.path, c.prefix); got != c.want {
			t.Errorf("FormatTensorName(%v, %q) = %q, want %q", c.path, c.prefix, got, c.want)
		}
	}
}

// TestFormatTensorNameMatchesPython checks every case against AITune's
// formula run by Python itself (repr included).
func TestFormatTensorNameMatchesPython(t *testing.T) {
	type pyKey struct {
		S *string `json:"s,omitempty"`
		I *int64  `json:"i,omitempty"`
	}
	var in [][]any
	for _, c := range nameCases {
		var p []pyKey
		for _, k := range c.path {
			if k.IsIndex {
				p = append(p, pyKey{I: &k.Index})
			} else {
				p = append(p, pyKey{S: &k.Name})
			}
		}
		in = append(in, []any{p, c.prefix})
	}
	stdin, _ := json.Marshal(in)
	const script = `
import json, re, sys
def format_tensor_name(path, prefix):
    if path == ():
        return prefix
    return prefix + "_" + re.sub("[^A-Za-z0-9_]+", "_", repr(path)).strip("_")
out = []
for keys, prefix in json.load(sys.stdin):
    path = tuple(k["s"] if "s" in k else k["i"] for k in (keys or []))
    if len(path) == 1:
        path = path[0]
    out.append(format_tensor_name(path, prefix))
json.dump(out, sys.stdout)
`
	var got []string
	if err := json.Unmarshal(runPython(t, stdin, "-c", script), &got); err != nil {
		t.Fatal(err)
	}
	for i, c := range nameCases {
		if got[i] != c.want {
			t.Errorf("Python names %v %q; the table says %q", c.path, got[i], c.want)
		}
	}
}

func TestLocatorTensorName(t *testing.T) {
	l := Locator{Path: []Step{{Name("options"), DictKey}, {Name("mask"), DictKey}}}
	if got := l.TensorName(); got != "input_options_mask" {
		t.Errorf("input locator names %q", got)
	}
	if got := (Locator{IsOutput: true}).TensorName(); got != "output" {
		t.Errorf("bare output names %q", got)
	}
}
