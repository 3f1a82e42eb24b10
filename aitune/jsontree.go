package aitune

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

// jkind is the type of a JSON value.
type jkind int

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

func (k jkind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// jnode is a parsed JSON value that keeps object keys in document order:
// the validator needs the order (output skeleton dicts are Python dicts,
// whose order matters) and to see every key (encoding/json drops
// duplicates silently).
type jnode struct {
	kind jkind
	b    bool
	num  json.Number
	str  string
	arr  []*jnode
	keys []string
	vals []*jnode
}

// get returns the member named key of an object node.
func (n *jnode) get(key string) (*jnode, bool) {
	for i, k := range n.keys {
		if k == key {
			return n.vals[i], true
		}
	}
	return nil, false
}

// parseJSON parses one JSON value. Duplicate object keys are an error
// naming where they are, with root as the name of the whole value.
func parseJSON(raw []byte, root string) (*jnode, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	n, err := parseValue(dec, root)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: unexpected data after the JSON value", root)
	}
	return n, nil
}

func parseValue(dec *json.Decoder, path string) (*jnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonErr(path, dec, err)
	}
	switch t := tok.(type) {
	case nil:
		return &jnode{kind: jNull}, nil
	case bool:
		return &jnode{kind: jBool, b: t}, nil
	case json.Number:
		return &jnode{kind: jNumber, num: t}, nil
	case string:
		return &jnode{kind: jString, str: t}, nil
	case json.Delim:
		switch t {
		case '[':
			n := &jnode{kind: jArray}
			for dec.More() {
				v, err := parseValue(dec, fmt.Sprintf("%s[%d]", path, len(n.arr)))
				if err != nil {
					return nil, err
				}
				n.arr = append(n.arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, jsonErr(path, dec, err)
			}
			return n, nil
		case '{':
			n := &jnode{kind: jObject}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, jsonErr(path, dec, err)
				}
				k := kt.(string)
				if _, dup := n.get(k); dup {
					return nil, fmt.Errorf("%s: key %q appears twice", path, k)
				}
				v, err := parseValue(dec, member(path, k))
				if err != nil {
					return nil, err
				}
				n.keys, n.vals = append(n.keys, k), append(n.vals, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, jsonErr(path, dec, err)
			}
			return n, nil
		}
	}
	return nil, fmt.Errorf("%s: unexpected JSON token %v", path, tok)
}

func jsonErr(path string, dec *json.Decoder, err error) error {
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: invalid JSON: unexpected end of input", path)
	}
	return fmt.Errorf("%s: invalid JSON near byte %d: %v", path, dec.InputOffset(), err)
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// member renders path.key, or path["key"] when key is not a plain
// identifier (graph names such as "0" are not).
func member(path, key string) string {
	if identRE.MatchString(key) {
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

// asInt reads a JSON number as an int64; ok is false for fractions,
// exponents and values out of range (Python would read "1.0" as a float).
func (n *jnode) asInt() (int64, bool) {
	if n.kind != jNumber || strings.ContainsAny(string(n.num), ".eE") {
		return 0, false
	}
	v, err := strconv.ParseInt(string(n.num), 10, 64)
	return v, err == nil
}

// asFloat reads any JSON number as a float64.
func (n *jnode) asFloat() (float64, bool) {
	if n.kind != jNumber {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n.num), 64)
	return f, err == nil && !math.IsInf(f, 0)
}
