package fleet

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tunefleet/tunefleet/internal/suggest"
)

// Error is one mistake in a fleet file: where it is (the file, a line
// and column where known), the field's path (models[2].strategy) and what
// is wrong.
type Error struct {
	Path  string
	Line  int
	Col   int
	Field string
	Msg   string
}

func (e *Error) Error() string {
	loc := e.Path
	if e.Line > 0 {
		loc += fmt.Sprintf(":%d", e.Line)
		if e.Col > 0 {
			loc += fmt.Sprintf(":%d", e.Col)
		}
	}
	if e.Field != "" {
		return loc + ": " + e.Field + ": " + e.Msg
	}
	return loc + ": " + e.Msg
}

// Problems are every mistake of a fleet file, in the file's order: a
// fleet file is checked whole, so that three mistakes take one run to
// learn, not three.
type Problems []*Error

// maxListed is how many problems a message lists; the rest are counted.
const maxListed = 50

func (p Problems) Error() string {
	if len(p) == 1 {
		return p[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d problems:", p[0].Path, len(p))
	for i, e := range p {
		if i == maxListed {
			fmt.Fprintf(&b, "\n  … and %d more", len(p)-maxListed)
			break
		}
		b.WriteString("\n  " + e.Error())
	}
	return b.String()
}

// Unwrap lets errors.As find an *Error in them.
func (p Problems) Unwrap() []error {
	out := make([]error, len(p))
	for i, e := range p {
		out[i] = e
	}
	return out
}

// sorted orders problems by where they are (file-level ones, line 0,
// first).
func (p Problems) sorted() Problems {
	slices.SortStableFunc(p, func(a, b *Error) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return a.Col - b.Col
	})
	return p
}

// orNil is p as an error: nil when empty.
func (p Problems) orNil() error {
	if len(p) == 0 {
		return nil
	}
	return p.sorted()
}

// pos is where a value is in the file.
type pos struct{ line, col int }

// fieldAt is the field a line's value is, and its column.
type fieldAt struct {
	field string
	col   int
}

// yamlKeys are the keys a struct type decodes (its yaml tags, inline
// structs' keys included).
func yamlKeys(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		switch {
		case name == "-":
		case strings.Contains(opts, "inline"):
			out = append(out, yamlKeys(f.Type)...)
		case name != "":
			out = append(out, name)
		}
	}
	return out
}

var (
	fileKeys     = yamlKeys(reflect.TypeFor[File]())
	settingsKeys = yamlKeys(reflect.TypeFor[Settings]())
	modelKeys    = yamlKeys(reflect.TypeFor[Model]())
)

// walk reads the file's node tree once: every unknown key (with the key
// it may have meant), each setting's position (the defaults' and each
// model's, so that a mistake is blamed on the line that holds it), each
// model's line, and, by line, the field a value is (to name the field of
// a type error yaml reports by line).
func (f *File) walk(root *yaml.Node) (Problems, map[int]fieldAt) {
	var probs Problems
	fields := map[int]fieldAt{}
	doc := root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	keys := func(n *yaml.Node, prefix string, known []string, each func(key string, v *yaml.Node)) {
		if n.Kind != yaml.MappingNode {
			return // yaml's type error says what it should be
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			field := prefix + k.Value
			fields[v.Line] = fieldAt{field, v.Column}
			if !slices.Contains(known, k.Value) {
				msg := fmt.Sprintf("unknown key %q", k.Value)
				if s := suggest.Closest(k.Value, known, 64); s != "" {
					msg += fmt.Sprintf("; did you mean %s?", s)
					f.meant = append(f.meant, s)
				} else {
					msg += fmt.Sprintf(" (want one of %s)", strings.Join(known, ", "))
				}
				probs = append(probs, &Error{Path: f.Path, Line: k.Line, Col: k.Column, Field: field, Msg: msg})
				continue
			}
			if each != nil {
				each(k.Value, v)
			}
		}
	}
	f.defaultsPos = map[string]pos{}
	keys(doc, "", fileKeys, func(key string, v *yaml.Node) {
		f.filePos(key, v)
		switch key {
		case "defaults":
			keys(v, "defaults.", settingsKeys, func(k string, sv *yaml.Node) { f.defaultsPos[k] = pos{sv.Line, sv.Column} })
		case "models":
			if v.Kind != yaml.SequenceNode {
				return
			}
			for i, mn := range v.Content {
				if i >= len(f.Models) {
					break
				}
				m := &f.Models[i]
				m.Line = mn.Line
				m.pos = map[string]pos{}
				keys(mn, fmt.Sprintf("models[%d].", i), modelKeys, func(k string, mv *yaml.Node) { m.pos[k] = pos{mv.Line, mv.Column} })
			}
		}
	})
	return probs, fields
}

// filePos records where a top-level value is.
func (f *File) filePos(key string, v *yaml.Node) {
	if f.topPos == nil {
		f.topPos = map[string]pos{}
	}
	f.topPos[key] = pos{v.Line, v.Column}
}

// at is an error at a top-level key's value.
func (f *File) at(key, format string, args ...any) *Error {
	p := f.topPos[key]
	return &Error{Path: f.Path, Line: p.line, Col: p.col, Field: key, Msg: fmt.Sprintf(format, args...)}
}
