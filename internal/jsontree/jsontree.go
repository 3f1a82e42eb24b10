package jsontree

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Kind is the type of a JSON value.
type Kind int

// The kinds of JSON values.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

func (k Kind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// Node is a parsed JSON value that keeps object keys in document order.
type Node struct {
	Kind Kind
	Bool bool
	Num  json.Number
	Str  string
	Arr  []*Node
	Keys []string
	Vals []*Node
}

// Get returns the member named key of an object node.
func (n *Node) Get(key string) (*Node, bool) {
	for i, k := range n.Keys {
		if k == key {
			return n.Vals[i], true
		}
	}
	return nil, false
}

// Parse parses one JSON value. Duplicate object keys are an error
// naming where they are, with root as the name of the whole value (""
// for a document of its own: paths then start with its first key).
func Parse(raw []byte, root string) (*Node, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	n, err := parseValue(dec, root)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%sunexpected data after the JSON value", At(root))
	}
	return n, nil
}

func parseValue(dec *json.Decoder, path string) (*Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonErr(path, dec, err)
	}
	switch t := tok.(type) {
	case nil:
		return &Node{Kind: Null}, nil
	case bool:
		return &Node{Kind: Bool, Bool: t}, nil
	case json.Number:
		return &Node{Kind: Number, Num: t}, nil
	case string:
		return &Node{Kind: String, Str: t}, nil
	case json.Delim:
		switch t {
		case '[':
			n := &Node{Kind: Array}
			for dec.More() {
				v, err := parseValue(dec, fmt.Sprintf("%s[%d]", path, len(n.Arr)))
				if err != nil {
					return nil, err
				}
				n.Arr = append(n.Arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, jsonErr(path, dec, err)
			}
			return n, nil
		case '{':
			n := &Node{Kind: Object}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, jsonErr(path, dec, err)
				}
				k := kt.(string)
				if _, dup := n.Get(k); dup {
					return nil, fmt.Errorf("%skey %q appears twice", At(path), k)
				}
				v, err := parseValue(dec, Member(path, k))
				if err != nil {
					return nil, err
				}
				n.Keys, n.Vals = append(n.Keys, k), append(n.Vals, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, jsonErr(path, dec, err)
			}
			return n, nil
		}
	}
	return nil, fmt.Errorf("%sunexpected JSON token %v", At(path), tok)
}

func jsonErr(path string, dec *json.Decoder, err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%sinvalid JSON: unexpected end of input", At(path))
	}
	return fmt.Errorf("%sinvalid JSON near byte %d: %v", At(path), dec.InputOffset(), err)
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Member renders path.key, or path["key"] when key is not a plain
// identifier (graph names such as "0" are not).
func Member(path, key string) string {
	if identRE.MatchString(key) {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

// At is the prefix of a message about the value at path: "path: ", or
// nothing for the whole document (path "").
func At(path string) string {
	if path == "" {
		return ""
	}
	return path + ": "
}

// AsInt reads a JSON number as an int64; ok is false for fractions,
// exponents and values out of range (Python would read "1.0" as a float).
func (n *Node) AsInt() (int64, bool) {
	if n.Kind != Number || strings.ContainsAny(string(n.Num), ".eE") {
		return 0, false
	}
	v, err := strconv.ParseInt(string(n.Num), 10, 64)
	return v, err == nil
}

// AsFloat reads any JSON number as a float64.
func (n *Node) AsFloat() (float64, bool) {
	if n.Kind != Number {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n.Num), 64)
	return f, err == nil && !math.IsInf(f, 0)
}

// Value converts the tree to the plain form encoding/json produces with
// UseNumber (map[string]any, []any, json.Number, string, bool, nil), which
// JSON Schema validators take.
func (n *Node) Value() any {
	switch n.Kind {
	case Bool:
		return n.Bool
	case Number:
		return n.Num
	case String:
		return n.Str
	case Array:
		out := make([]any, len(n.Arr))
		for i, e := range n.Arr {
			out[i] = e.Value()
		}
		return out
	case Object:
		out := make(map[string]any, len(n.Keys))
		for i, k := range n.Keys {
			out[k] = n.Vals[i].Value()
		}
		return out
	}
	return nil
}
