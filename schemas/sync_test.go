package schemas_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/report"
	"github.com/tunefleet/tunefleet/schemas"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/tuner"
)

// schemaFiles decodes every schema, by $id.
func schemaFiles(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, d := range schemas.Docs() {
		raw, err := schemas.Raw(d)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		out[d.ID()] = m
	}
	return out
}

// resolve follows $ref (relative to the file's $id, fragment pointers only
// into $defs) until a schema with properties or items is reached.
func resolve(t *testing.T, files map[string]map[string]any, base string, s map[string]any) (string, map[string]any) {
	for range 10 {
		ref, ok := s["$ref"].(string)
		if !ok {
			break
		}
		file, frag, _ := strings.Cut(ref, "#")
		if file != "" {
			base = schemas.BaseURL + file
		}
		next := files[base]
		for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
			if tok != "" {
				next = next[tok].(map[string]any)
			}
		}
		// A $ref next to properties (winner = selection + engine) merges.
		if props, ok := s["properties"].(map[string]any); ok {
			merged := map[string]any{}
			for k, v := range next {
				merged[k] = v
			}
			all := map[string]any{}
			for k, v := range next["properties"].(map[string]any) {
				all[k] = v
			}
			for k, v := range props {
				all[k] = v
			}
			merged["properties"] = all
			next = merged
		}
		s = next
	}
	return base, s
}

// jsonFields lists a struct's JSON members, embedded structs flattened.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			for k, v := range jsonFields(ft) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

var marshaler = reflect.TypeFor[json.Marshaler]()

// compare checks that a Go type and its schema name the same members, all
// the way down, so the schemas cannot drift from what the code writes.
func compare(t *testing.T, files map[string]map[string]any, base string, s map[string]any, typ reflect.Type, where string) {
	base, s = resolve(t, files, base, s)
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ.Implements(marshaler) || reflect.PointerTo(typ).Implements(marshaler) || typ.Kind() == reflect.Interface {
		return // its own JSON form (time.Time, shapes.Axis, json.RawMessage)
	}
	switch typ.Kind() {
	case reflect.Slice, reflect.Array:
		if typ.Elem().Kind() == reflect.Uint8 {
			return
		}
		items, ok := s["items"].(map[string]any)
		if !ok {
			t.Errorf("%s: Go has a list, the schema no items", where)
			return
		}
		compare(t, files, base, items, typ.Elem(), where+"[]")
	case reflect.Map:
		add, ok := s["additionalProperties"].(map[string]any)
		if !ok {
			t.Errorf("%s: Go has a map, the schema no additionalProperties schema", where)
			return
		}
		compare(t, files, base, add, typ.Elem(), where+"{}")
	case reflect.Struct:
		props, _ := s["properties"].(map[string]any)
		fields := jsonFields(typ)
		for name, ft := range fields {
			ps, ok := props[name].(map[string]any)
			if !ok {
				t.Errorf("%s.%s: %s writes it, the schema has no such property", where, name, typ)
				continue
			}
			compare(t, files, base, ps, ft, where+"."+name)
		}
		for name := range props {
			if _, ok := fields[name]; !ok {
				t.Errorf("%s.%s: the schema has it, %s does not", where, name, typ)
			}
		}
		req, _ := s["required"].([]any)
		for _, r := range req {
			if _, ok := fields[r.(string)]; !ok {
				t.Errorf("%s: the schema requires %s, which %s does not have", where, r, typ)
			}
		}
	}
}

func TestSchemasMatchGoTypes(t *testing.T) {
	files := schemaFiles(t)
	for _, tc := range []struct {
		doc  schemas.Doc
		typ  reflect.Type
		skip []string
	}{
		{schemas.Bundle, reflect.TypeFor[bundle.Manifest](), nil},
		{schemas.Result, reflect.TypeFor[tuner.Result](), nil},
		{schemas.State, reflect.TypeFor[state.State](), nil},
		{schemas.Latest, reflect.TypeFor[state.Latest](), nil},
		{schemas.History, reflect.TypeFor[history.Entry](), nil},
		{schemas.HistoryHead, reflect.TypeFor[history.Head](), nil},
		{schemas.Summary, reflect.TypeFor[report.Summary](), nil},
	} {
		t.Run(string(tc.doc), func(t *testing.T) {
			s := files[tc.doc.ID()]
			if !slices.Contains([]string{"object"}, s["type"].(string)) {
				t.Fatalf("top-level type %v", s["type"])
			}
			compare(t, files, tc.doc.ID(), s, tc.typ, strings.TrimSuffix(string(tc.doc), ".schema.json"))
		})
	}
}

func TestSchemasAreStandard(t *testing.T) {
	for id, s := range schemaFiles(t) {
		if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" || s["$id"] != id {
			t.Errorf("%s: $schema %v, $id %v; want draft 2020-12 and its own URL", id, s["$schema"], s["$id"])
		}
	}
}
