package schemas

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/tunefleet/tunefleet/internal/jsontree"
)

var printer = message.NewPrinter(language.English)

// messenger turns a validator's error tree into problem lines. The tree
// says where (instance location, schema location) and which keyword
// failed; the lines say it the way the rest of tunefleet does: the JSON
// path, what the value is, what is wanted.
type messenger struct {
	c     *compiled
	doc   any
	root  string
	probs []string
}

func (m *messenger) add(path, format string, args ...any) {
	m.probs = append(m.probs, jsontree.At(path)+fmt.Sprintf(format, args...))
}

// path renders an instance location as a JSON path, walking the document to
// tell array indices from object keys.
func (m *messenger) path(loc []string) string {
	p, v := m.root, m.doc
	for _, tok := range loc {
		switch x := v.(type) {
		case []any:
			i, _ := strconv.Atoi(tok)
			p = fmt.Sprintf("%s[%d]", p, i)
			v = nil
			if i >= 0 && i < len(x) {
				v = x[i]
			}
		case map[string]any:
			p, v = jsontree.Member(p, tok), x[tok]
		default:
			p, v = jsontree.Member(p, tok), nil
		}
	}
	return p
}

func (m *messenger) value(loc []string) any {
	v := m.doc
	for _, tok := range loc {
		switch x := v.(type) {
		case []any:
			i, _ := strconv.Atoi(tok)
			if i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		case map[string]any:
			v = x[tok]
		default:
			return nil
		}
	}
	return v
}

func (m *messenger) walk(e *jsonschema.ValidationError) {
	at := m.path(e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		for _, c := range e.Causes {
			m.walk(c)
		}
	case *kind.AnyOf, *kind.OneOf:
		m.alternatives(e, at)
	case *kind.Type:
		m.add(at, "want %s, got %s", wantTypes(k.Want), kindOf(m.value(e.InstanceLocation)))
	case *kind.Required:
		for _, p := range k.Missing {
			m.add(at, "%s is missing", p)
		}
	case *kind.AdditionalProperties:
		allowed := m.node(e.SchemaURL, "properties")
		for _, p := range k.Properties {
			if allowed != nil {
				m.add(jsontree.Member(at, p), "unknown field (want one of %s)", strings.Join(allowed.Keys, ", "))
			} else {
				m.add(jsontree.Member(at, p), "unknown field")
			}
		}
	case *kind.DependentRequired:
		m.add(at, "%s is missing (%s needs it)", strings.Join(k.Missing, " and "), k.Prop)
	case *kind.Const:
		m.add(at, "is %s, want %s", show(k.Got), show(k.Want))
	case *kind.Enum:
		m.add(at, "is %s, want %s", show(k.Got), orList(k.Want))
	case *kind.Pattern:
		if d := m.description(e.SchemaURL); d != "" {
			m.add(at, "is %s; want %s", show(k.Got), d)
		} else {
			m.add(at, "is %s, which does not match %s", show(k.Got), k.Want)
		}
	case *kind.MinLength:
		msg := fmt.Sprintf("is %d characters, want at least %d", k.Got, k.Want)
		if k.Got == 0 {
			msg = "is empty"
		}
		if d := m.description(e.SchemaURL); d != "" {
			msg += "; want " + d
		}
		m.add(at, "%s", msg)
	case *kind.MaxLength:
		m.add(at, "is %d characters, more than the limit of %d", k.Got, k.Want)
	case *kind.Minimum:
		m.add(at, "is %s, want ≥ %s", rat(k.Got), rat(k.Want))
	case *kind.ExclusiveMinimum:
		m.add(at, "is %s, want > %s", rat(k.Got), rat(k.Want))
	case *kind.Maximum:
		m.add(at, "is %s, want ≤ %s", rat(k.Got), rat(k.Want))
	case *kind.ExclusiveMaximum:
		m.add(at, "is %s, want < %s", rat(k.Got), rat(k.Want))
	case *kind.MinItems:
		if k.Got == 0 {
			m.add(at, "is empty (want at least %d %s)", k.Want, plural(k.Want, "item"))
		} else {
			m.add(at, "has %d %s, want at least %d", k.Got, plural(k.Got, "item"), k.Want)
		}
	case *kind.MaxItems:
		m.add(at, "has %d items, more than the limit of %d", k.Got, k.Want)
	case *kind.MinProperties:
		m.add(at, "has %d %s, want at least %d", k.Got, plural(k.Got, "member"), k.Want)
	case *kind.MaxProperties:
		m.add(at, "has %d members, more than the limit of %d", k.Got, k.Want)
	case *kind.FalseSchema:
		if strings.HasSuffix(e.SchemaURL, "/unevaluatedProperties") {
			m.add(at, "unknown field") // an object built of several schemas ($ref plus properties)
			break
		}
		m.add(at, "is not allowed here")
	case *kind.Not:
		if d := m.description(e.SchemaURL); d != "" {
			m.add(at, "is not allowed here (%s)", d)
		} else {
			m.add(at, "is not allowed here")
		}
	default:
		m.add(at, "%s", e.ErrorKind.LocalizedString(printer))
	}
}

// alternatives reports a value that fits none of anyOf/oneOf's branches.
// Branches that failed on the value's type were not meant (an object is not
// a number); when one branch remains, its problems are the problems, so a
// mistake deep in a recursive structure is reported where it is.
// Otherwise the schema's description says what is wanted.
func (m *messenger) alternatives(e *jsonschema.ValidationError, at string) {
	var meant []*jsonschema.ValidationError
	for _, c := range e.Causes {
		if !typeMismatch(c, e.InstanceLocation) {
			meant = append(meant, c)
		}
	}
	if len(meant) == 1 {
		m.walk(meant[0])
		return
	}
	if oo, ok := e.ErrorKind.(*kind.OneOf); ok && len(oo.Subschemas) > 1 {
		m.add(at, "fits more than one form the schema allows")
		return
	}
	want := m.description(e.SchemaURL)
	if want == "" {
		want = "one of the forms the schema allows"
	}
	m.add(at, "want %s, got %s", want, show(m.value(e.InstanceLocation)))
}

// typeMismatch reports whether a branch failed only because the value at
// loc has another type than the branch accepts.
func typeMismatch(e *jsonschema.ValidationError, loc []string) bool {
	for {
		switch e.ErrorKind.(type) {
		case *kind.Type:
			return slices.Equal(e.InstanceLocation, loc)
		case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
			if len(e.Causes) != 1 {
				return false
			}
			e = e.Causes[0]
		default:
			return false
		}
	}
}

// node resolves a schema location (an $id with a JSON-pointer fragment)
// in the schema files, then the member key of it.
func (m *messenger) node(schemaURL, key string) *jsontree.Node {
	base, frag, _ := strings.Cut(schemaURL, "#")
	n, ok := m.c.trees[base]
	if !ok {
		return nil
	}
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if tok == "" {
			continue
		}
		if t, err := url.PathUnescape(tok); err == nil {
			tok = t
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch n.Kind {
		case jsontree.Object:
			if n, ok = n.Get(tok); !ok {
				return nil
			}
		case jsontree.Array:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n.Arr) {
				return nil
			}
			n = n.Arr[i]
		default:
			return nil
		}
	}
	if key == "" {
		return n
	}
	if n.Kind != jsontree.Object {
		return nil
	}
	v, _ := n.Get(key)
	return v
}

func (m *messenger) description(schemaURL string) string {
	if d := m.node(schemaURL, "description"); d != nil && d.Kind == jsontree.String {
		return d.Str
	}
	return ""
}

var typeNames = []struct{ json, words string }{
	{"null", "null"}, {"boolean", "a boolean"}, {"integer", "an integer"}, {"number", "a number"},
	{"string", "a string"}, {"array", "an array"}, {"object", "an object"},
}

func wantTypes(want []string) string {
	var words []string
	for _, t := range typeNames {
		if slices.Contains(want, t.json) {
			words = append(words, t.words)
		}
	}
	return orWords(words)
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, float64, int, int64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// show renders a value as JSON, shortened when long.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if s := string(b); len(s) <= 80 {
		return s
	}
	return string(b[:77]) + "…"
}

func orList(vs []any) string {
	words := make([]string, len(vs))
	for i, v := range vs {
		words[i] = show(v)
	}
	return orWords(words)
}

func orWords(words []string) string {
	switch len(words) {
	case 0:
		return "nothing"
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

func rat(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
