package bundle

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of onnx.proto that externalLocations reads.
const (
	modelFunctions         = 25
	functionNode           = 7
	graphSparseInitializer = 15
	nodeAttribute          = 5
	attrTensor             = 5
	attrGraph              = 6
	attrTensors            = 10
	attrGraphs             = 11
	attrSparseTensor       = 22
	attrSparseTensors      = 23
	sparseValues           = 1
	sparseIndices          = 2
	tensorExternalData     = 13
	stringStringKey        = 1
	stringStringValue      = 2
	maxExternalScanNesting = 64
	externalLocationKey    = "location"
)

// externalLocations returns the external-data locations of a serialized
// ModelProto, as written, deduplicated, in order of first use: those of the
// graph's initializers (sparse ones too), of tensors in node attributes
// (Constant and the like) and of the subgraphs and functions they nest.
// Only the tags are walked; tensor values are skipped in place. Nesting
// deeper than maxExternalScanNesting is refused, so a hostile file cannot
// exhaust the stack.
func externalLocations(model []byte) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(loc string) {
		if !seen[loc] {
			seen[loc] = true
			out = append(out, loc)
		}
	}
	err := eachField(model, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case modelGraph:
			return scanGraph(v, 0, add)
		case modelFunctions:
			return eachBytes(v, func(num protowire.Number, v []byte) error {
				if num == functionNode {
					return scanNode(v, 0, add)
				}
				return nil
			})
		}
		return nil
	})
	return out, err
}

// eachBytes calls fn for every length-delimited field of a message.
func eachBytes(b []byte, fn func(num protowire.Number, v []byte) error) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		return fn(num, v)
	})
}

func scanGraph(b []byte, depth int, add func(string)) error {
	if depth > maxExternalScanNesting {
		return fmt.Errorf("subgraphs nested more than %d deep", maxExternalScanNesting)
	}
	return eachBytes(b, func(num protowire.Number, v []byte) error {
		switch num {
		case graphInitializer:
			return scanTensor(v, add)
		case graphSparseInitializer:
			return scanSparse(v, add)
		case graphNode:
			return scanNode(v, depth, add)
		}
		return nil
	})
}

func scanNode(b []byte, depth int, add func(string)) error {
	return eachBytes(b, func(num protowire.Number, v []byte) error {
		if num != nodeAttribute {
			return nil
		}
		return eachBytes(v, func(num protowire.Number, v []byte) error {
			switch num {
			case attrTensor, attrTensors:
				return scanTensor(v, add)
			case attrSparseTensor, attrSparseTensors:
				return scanSparse(v, add)
			case attrGraph, attrGraphs:
				return scanGraph(v, depth+1, add)
			}
			return nil
		})
	})
}

func scanSparse(b []byte, add func(string)) error {
	return eachBytes(b, func(num protowire.Number, v []byte) error {
		if num == sparseValues || num == sparseIndices {
			return scanTensor(v, add)
		}
		return nil
	})
}

// scanTensor adds a TensorProto's external-data location. Its
// data_location is not consulted: a location is a path a reader may
// follow, whatever the flag says, so every one is checked.
func scanTensor(b []byte, add func(string)) error {
	return eachBytes(b, func(num protowire.Number, v []byte) error {
		if num != tensorExternalData {
			return nil
		}
		var key, value string
		err := eachBytes(v, func(num protowire.Number, v []byte) error {
			switch num {
			case stringStringKey:
				key = string(v)
			case stringStringValue:
				value = string(v)
			}
			return nil
		})
		if err == nil && key == externalLocationKey {
			add(value)
		}
		return err
	})
}

// resolveExternal checks the external-data locations of the ONNX file at
// the bundle-relative path onnxRel and returns them as bundle-relative
// paths, sorted. ONNX resolves a location against the ONNX file's
// directory; one that is absolute, climbs with "..", leaves the bundle
// through a symbolic link, or is not a regular file in the bundle is
// refused, since a worker must read nothing but the bundle (a location of
// /proc/self/environ would hand a reader the worker's secrets).
func resolveExternal(root, onnxRel string, locs []string) ([]string, []string) {
	var out, probs []string
	base := path.Dir(clean(onnxRel))
	for _, loc := range locs {
		bad := func(format string, args ...any) {
			probs = append(probs, fmt.Sprintf("onnx %q: external data location %q ", onnxRel, loc)+fmt.Sprintf(format, args...))
		}
		switch {
		case loc == "":
			bad("is empty")
			continue
		case strings.HasPrefix(loc, "/") || path.IsAbs(loc):
			bad("is absolute; external data must be a file beside the ONNX file, inside the bundle")
			continue
		case strings.ContainsAny(loc, "\\\x00"):
			bad("contains a backslash or NUL; use '/' separators")
			continue
		case slices.Contains(strings.Split(loc, "/"), ".."):
			bad("escapes the bundle (contains \"..\")")
			continue
		}
		rel := clean(path.Join(base, loc))
		p, err := Resolve(root, rel)
		if err != nil {
			bad("(%s): %v", rel, err)
			continue
		}
		if fi, err := os.Stat(p); err != nil {
			bad("(%s): %v", rel, err)
			continue
		} else if !fi.Mode().IsRegular() {
			bad("(%s) is not a regular file", rel)
			continue
		}
		out = append(out, rel)
	}
	slices.Sort(out)
	return slices.Compact(out), probs
}
