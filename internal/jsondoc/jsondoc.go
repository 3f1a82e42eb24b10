package jsondoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// Doc is the indented encoding of a document split around the value of
// one of its top-level fields: Head ends with the field's name and its
// colon, Tail starts after the value. Head, the field's value as Array
// writes it, and Tail are the document as json.MarshalIndent(v, "", "  ")
// writes it, with a final newline.
type Doc struct {
	Head, Tail []byte
}

// Split encodes v, a struct or map whose top-level field (by its JSON
// name) holds an empty, non-nil slice, and splits the encoding there.
func Split(v any, field string) (Doc, error) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return Doc{}, err
	}
	// A top-level field is the only one indented by exactly two spaces;
	// a string cannot hold the quotes unescaped.
	name, err := json.Marshal(field)
	if err != nil {
		return Doc{}, err
	}
	mark := append(append([]byte("\n  "), name...), ": []"...)
	i := bytes.Index(data, mark)
	if i < 0 || bytes.Contains(data[i+len(mark):], mark) {
		return Doc{}, fmt.Errorf("jsondoc: no single top-level field %s holding an empty array", name)
	}
	head := i + len(mark) - len("[]")
	return Doc{Head: data[:head:head], Tail: append(data[i+len(mark):], '\n')}, nil
}

// Array writes a top-level array's value element by element, as the
// document's encoding holds it. Close ends it.
type Array struct {
	w io.Writer
	n int
	// Null is what an array without elements is written as when set:
	// "null", a nil slice's encoding; else "[]".
	Null bool
}

// NewArray writes an array's value to w.
func NewArray(w io.Writer) *Array { return &Array{w: w} }

// Add writes one element.
func (a *Array) Add(v any) error {
	data, err := json.MarshalIndent(v, "    ", "  ")
	if err != nil {
		return err
	}
	sep := ",\n    "
	if a.n == 0 {
		sep = "[\n    "
	}
	a.n++
	if _, err := io.WriteString(a.w, sep); err != nil {
		return err
	}
	_, err = a.w.Write(data)
	return err
}

// Len is how many elements were added.
func (a *Array) Len() int { return a.n }

// Close ends the array (it does not close the writer).
func (a *Array) Close() error {
	end := "\n  ]"
	switch {
	case a.n == 0 && a.Null:
		end = "null"
	case a.n == 0:
		end = "[]"
	}
	_, err := io.WriteString(a.w, end)
	return err
}
