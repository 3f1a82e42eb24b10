package jsontree_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tunefleet/tunefleet/internal/jsontree"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, root, in, err string
	}{
		{"duplicate key in a document", "", `{"a": {"b": 1, "b": 2}}`, `a: key "b" appears twice`},
		{"duplicate key at the root", "", `{"a": 1, "a": 2}`, `key "a" appears twice`},
		{"duplicate key under a named root", "aitune", `{"graphs": {"0": {"x": 1, "x": 1}}}`, `aitune.graphs["0"]: key "x" appears twice`},
		{"truncated", "aitune", `{"format": `, `aitune.format: invalid JSON: unexpected end of input`},
		{"trailing data", "", `{} {}`, `unexpected data after the JSON value`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := jsontree.Parse([]byte(tc.in), tc.root)
			if err == nil || err.Error() != tc.err {
				t.Errorf("err = %v, want %q", err, tc.err)
			}
		})
	}
}

func TestOrderAndValue(t *testing.T) {
	n, err := jsontree.Parse([]byte(`{"z": [1, 2.5, null, true, "s"], "a": {}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(n.Keys, []string{"z", "a"}) {
		t.Errorf("keys %v, want document order", n.Keys)
	}
	want := map[string]any{"z": []any{json.Number("1"), json.Number("2.5"), nil, true, "s"}, "a": map[string]any{}}
	if got := n.Value(); !reflect.DeepEqual(got, want) {
		t.Errorf("Value() = %#v", got)
	}
	z, _ := n.Get("z")
	if i, ok := z.Arr[0].AsInt(); !ok || i != 1 {
		t.Errorf("AsInt(1) = %d, %v", i, ok)
	}
	if _, ok := z.Arr[1].AsInt(); ok {
		t.Error("2.5 read as an int")
	}
}

func TestMember(t *testing.T) {
	for _, tc := range []struct{ path, key, want string }{
		{"", "graphs", "graphs"}, {"", "0", `["0"]`}, {"aitune", "graphs", "aitune.graphs"}, {"aitune.graphs", "0", `aitune.graphs["0"]`},
	} {
		if got := jsontree.Member(tc.path, tc.key); got != tc.want {
			t.Errorf("Member(%q, %q) = %q, want %q", tc.path, tc.key, got, tc.want)
		}
	}
}
