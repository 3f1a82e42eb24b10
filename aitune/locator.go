package aitune

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// ObjectType is AITune's ObjectType (an IntEnum): how one step of a
// locator's access path indexes into its container.
type ObjectType int

// The object types, with AITune's values.
const (
	Sequence  ObjectType = 0 // list or tuple, integer index
	DictKey   ObjectType = 1 // dict (or UserDict) key; also every input's first step
	Dataclass ObjectType = 2 // dataclass field
	UserType  ObjectType = 3 // attribute of a registered user type
)

var objectTypeNames = map[ObjectType]string{Sequence: "SEQUENCE", DictKey: "DICT", Dataclass: "DATACLASS", UserType: "USER_TYPE"}

// String is the enum member's name, as the aitune block spells it.
func (t ObjectType) String() string {
	if s, ok := objectTypeNames[t]; ok {
		return s
	}
	return "ObjectType(" + strconv.Itoa(int(t)) + ")"
}

// parseObjectType reads an enum member name.
func parseObjectType(s string) (ObjectType, bool) {
	for t, n := range objectTypeNames {
		if n == s {
			return t, true
		}
	}
	return 0, false
}

// Key is one accessor of an access path: a string (dict key, parameter,
// field or attribute name) or an integer (sequence index, or an int dict
// key). Python keeps the two apart ("0" and 0 are different keys and
// format differently), so Key does too.
type Key struct {
	Name    string
	Index   int64
	IsIndex bool
}

// Name returns a string key.
func Name(s string) Key { return Key{Name: s} }

// Index returns an integer key.
func Index(i int64) Key { return Key{Index: i, IsIndex: true} }

// repr is Python's repr() of the key.
func (k Key) repr() string {
	if k.IsIndex {
		return strconv.FormatInt(k.Index, 10)
	}
	return pyStrRepr(k.Name)
}

// String renders the key for messages (Python literal form).
func (k Key) String() string { return k.repr() }

// Step is one step of a locator's access path.
type Step struct {
	Key  Key
	Type ObjectType
}

// Locator is AITune's Locator: the access path of one leaf in a module's
// inputs (starting at the bound-arguments dict, so the first step is the
// forward parameter name with type DICT) or outputs (starting at the
// returned object; a bare tensor output has the empty path).
type Locator struct {
	Path     []Step
	IsOutput bool
}

// Keys returns the accessors of the path without their types: AITune's
// Locator.path before the 1-step/tuple collapsing.
func (l Locator) Keys() []Key {
	ks := make([]Key, len(l.Path))
	for i, s := range l.Path {
		ks[i] = s.Key
	}
	return ks
}

// TensorName is the ONNX/TensorRT tensor name AITune binds this locator
// to: FormatTensorName of its path with prefix "input" or "output".
func (l Locator) TensorName() string {
	prefix := "input"
	if l.IsOutput {
		prefix = "output"
	}
	return FormatTensorName(l.Keys(), prefix)
}

// String renders the path as AITune's display_path does (x,
// options["mask"], items[0], output.logits).
func (l Locator) String() string {
	var b strings.Builder
	if l.IsOutput {
		b.WriteString("output")
	}
	for i, s := range l.Path {
		switch {
		case i == 0 && !l.IsOutput && !s.Key.IsIndex:
			b.WriteString(s.Key.Name)
		case s.Type == Dataclass || s.Type == UserType:
			b.WriteString("." + s.Key.Name)
		case s.Type == Sequence || s.Key.IsIndex:
			b.WriteString("[" + s.Key.repr() + "]")
		default:
			b.WriteString("[" + strconv.Quote(s.Key.Name) + "]")
		}
	}
	if b.Len() == 0 {
		return "()"
	}
	return b.String()
}

func (l Locator) equal(o Locator) bool {
	if len(l.Path) != len(o.Path) {
		return false
	}
	for i := range l.Path {
		if l.Path[i] != o.Path[i] {
			return false
		}
	}
	return true
}

// isPrefixOf reports whether l's path is a proper or equal prefix of o's.
func (l Locator) isPrefixOf(o Locator) bool {
	if len(l.Path) > len(o.Path) {
		return false
	}
	for i := range l.Path {
		if l.Path[i].Key != o.Path[i].Key {
			return false
		}
	}
	return true
}

var nonWord = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// FormatTensorName is AITune's naming contract (aitune/torch/utils/
// tensor.py format_tensor_name): prefix alone for the empty path, else
// prefix + "_" + repr(path) with every run of characters outside
// [A-Za-z0-9_] replaced by "_" and leading/trailing "_" stripped. A 1-step
// path is its bare accessor (repr("x") is 'x'), longer ones a tuple
// (repr(("items", 0)) is ('items', 0)). ONNX inputs/outputs, TensorRT
// profile keys and engine bindings all use these names, so an engine built
// outside AITune must be named this way for AITune to bind it.
func FormatTensorName(path []Key, prefix string) string {
	if len(path) == 0 {
		return prefix
	}
	var r string
	if len(path) == 1 {
		r = path[0].repr()
	} else {
		parts := make([]string, len(path))
		for i, k := range path {
			parts[i] = k.repr()
		}
		r = "(" + strings.Join(parts, ", ") + ")"
	}
	return prefix + "_" + strings.Trim(nonWord.ReplaceAllString(r, "_"), "_")
}

// pyStrRepr is Python 3's repr() of a str: single quotes unless the string
// holds a ' and no ", backslash escapes for the quote, backslash, \t \n \r,
// \xhh for other control characters and \x7f, \xhh/\uhhhh/\Uhhhhhhhh for
// non-printable code points; printable ones stay as they are. Only the
// letters and digits of escapes survive FormatTensorName, but they do
// survive ("a\tb" names "input_a_tb"), so the escapes must be Python's.
func pyStrRepr(s string) string {
	quote := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x7f:
			b.WriteRune(r)
		case !pyPrintable(r):
			switch {
			case r <= 0xff:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r <= 0xffff:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

// pyPrintable approximates str.isprintable for one non-ASCII code point:
// Python treats as non-printable the categories Cc, Cf, Cs, Co, Cn, Zl, Zp
// and Zs (except the ASCII space), which is what unicode.IsPrint excludes
// too. The Unicode versions of Go and Python may differ for code points
// assigned recently; such names are rare enough not to matter.
func pyPrintable(r rune) bool { return unicode.IsPrint(r) }
