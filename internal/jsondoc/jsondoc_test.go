package jsondoc_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/tunefleet/tunefleet/internal/jsondoc"
)

type item struct {
	Name  string            `json:"name"`
	Tags  []string          `json:"tags,omitempty"`
	Attrs map[string]string `json:"attrs,omitempty"`
	Inner *item             `json:"inner,omitempty"`
	Items []item            `json:"items"`
}

type doc struct {
	Format string   `json:"format"`
	Notes  []string `json:"notes,omitempty"`
	Items  []item   `json:"items"`
	After  *item    `json:"after,omitempty"`
	Count  int      `json:"count"`
}

// The document written as its head, the array element by element and its
// tail is what json.MarshalIndent writes for the whole of it, whatever the
// elements hold (nested arrays and objects, a field of the same name
// deeper down, characters that are escaped).
func TestSplitAndArrayAreMarshalIndent(t *testing.T) {
	deep := item{Name: `a "quoted" <b> & \ name`, Tags: []string{"x", "y"}, Attrs: map[string]string{"k": "v", "a": "b"},
		Inner: &item{Name: "in", Items: []item{{Name: "nested", Items: []item{}}}}, Items: []item{}}
	for _, tc := range []struct {
		name string
		doc  doc
		null bool // a nil slice is written null
	}{
		{"none, written []", doc{Format: "f", Items: nil}, false},
		{"none, written null", doc{Format: "f", Items: nil}, true},
		{"one", doc{Format: "f", Items: []item{{Name: "one"}}}, false},
		{"many and nested", doc{Format: "f", Notes: []string{`"items": []`}, Items: []item{deep, {Name: "2"}, deep},
			After: &item{Name: "after", Items: []item{}}, Count: 3}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole := tc.doc
			if whole.Items == nil && !tc.null {
				whole.Items = []item{}
			}
			want, err := json.MarshalIndent(whole, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, '\n')

			head := tc.doc
			head.Items = []item{}
			d, err := jsondoc.Split(head, "items")
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			b.Write(d.Head)
			a := jsondoc.NewArray(&b)
			a.Null = tc.null
			for _, it := range tc.doc.Items {
				if err := a.Add(it); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			b.Write(d.Tail)
			if got := b.String(); got != string(want) {
				t.Errorf("streamed:\n%s\nwant (MarshalIndent):\n%s", got, want)
			}
			if a.Len() != len(tc.doc.Items) {
				t.Errorf("Len %d, want %d", a.Len(), len(tc.doc.Items))
			}
		})
	}
}

// A field that is missing, not an empty array, or not at the top level
// is refused.
func TestSplitRefusesWhatItCannotSplit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		v     any
		field string
	}{
		{"no such field", doc{Items: []item{}}, "graphs"},
		{"array not empty", doc{Items: []item{{Name: "x"}}}, "items"},
		{"nil slice", doc{}, "items"},
		{"only deeper down", map[string]any{"outer": map[string]any{"items": []int{}}}, "items"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := jsondoc.Split(tc.v, tc.field); err == nil {
				t.Errorf("Split of %+v at %q: no error", tc.v, tc.field)
			}
		})
	}
}
