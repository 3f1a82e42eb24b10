package bundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/tunefleet/tunefleet/schemas"
	"github.com/tunefleet/tunefleet/shapes"
)

// FormatV1 is the format string of bundle.json version 1.
const FormatV1 = "tunefleet.bundle/v1"

// ManifestName is the bundle's manifest file at its root.
const ManifestName = "bundle.json"

// Manifest is bundle.json.
type Manifest struct {
	Format        string               `json:"format"`
	Model         string               `json:"model"`
	ModuleType    string               `json:"module_type,omitempty"`
	DynamicShapes shapes.DynamicShapes `json:"dynamic_shapes,omitempty"`
	Graphs        []Graph              `json:"graphs"`
	// AITune carries what only the recorder knows (forward signature,
	// output skeleton, …) for writing an AITune checkpoint. It is kept
	// verbatim here; its schema belongs to the checkpoint writer.
	AITune json.RawMessage `json:"aitune,omitempty"`
}

// Graph is one graph spec of the bundle.
type Graph struct {
	Name       string               `json:"name"`
	ONNX       string               `json:"onnx"`
	Inputs     []TensorDecl         `json:"inputs"`
	Outputs    []TensorDecl         `json:"outputs"`
	Samples    []string             `json:"samples"`
	Tolerances map[string]Tolerance `json:"tolerances,omitempty"`
	// ExternalData lists the bundle-relative files the ONNX file keeps
	// tensor values in (ONNX external data). Open derives it from the ONNX
	// file and fills it in, so that it travels with the manifest (run.json)
	// and the graph's files (Paths) include it; a bundle.json that lists it
	// must list exactly what the ONNX file references.
	ExternalData []string `json:"external_data,omitempty"`
}

// TensorDecl declares one input or output: its ONNX tensor name, dtype and
// labelled shape with bounds.
type TensorDecl struct {
	shapes.TensorSpec
	DType DType `json:"dtype"`
}

// Tolerance overrides the correctness check's defaults for one output:
// |got - want| ≤ ATol + RTol·|want|.
type Tolerance struct {
	ATol *float64 `json:"atol,omitempty"`
	RTol *float64 `json:"rtol,omitempty"`
}

// Specs returns the shape specs of a list of declarations.
func Specs(decls []TensorDecl) []shapes.TensorSpec {
	out := make([]shapes.TensorSpec, len(decls))
	for i, d := range decls {
		out[i] = d.TensorSpec
	}
	return out
}

// ManifestError lists every way bundle.json breaks its published schema
// (schemas/bundle.schema.json), each problem naming its JSON path.
type ManifestError struct {
	Problems []string // "bundle.json: graphs[0].inputs[1].dtype: …"
}

func (e *ManifestError) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0]
	}
	return fmt.Sprintf("%d problems:\n  - %s", len(e.Problems), strings.Join(e.Problems, "\n  - "))
}

// ParseManifest decodes bundle.json strictly. Its structure is checked
// against the published schema first, so that every misspelt key, wrong
// type or unknown dtype is reported at once, by JSON path, in a
// *ManifestError; what needs the files or crosses fields is left to Open.
func ParseManifest(b []byte) (Manifest, error) {
	if json.Valid(b) {
		if _, err := schemas.ValidateJSON(schemas.Bundle, "", b); err != nil {
			probs := schemas.Problems(err)
			if probs == nil {
				return Manifest{}, fmt.Errorf("%s: %w", ManifestName, err)
			}
			me := &ManifestError{}
			for _, p := range probs {
				me.Problems = append(me.Problems, ManifestName+": "+p)
			}
			return Manifest{}, me
		}
	}
	// The decoder reports what is not JSON at all, as it always did.
	return decodeManifest(b)
}

// decodeManifest decodes bundle.json strictly (no unknown field, nothing
// after the object), without its schema: ParseManifest checks that first,
// Identify does not need it.
func decodeManifest(b []byte) (Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("%s: %w", ManifestName, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Manifest{}, fmt.Errorf("%s: unexpected data after the JSON object", ManifestName)
	}
	return m, nil
}

// Marshal encodes the manifest as indented JSON.
func (m Manifest) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Graph returns the graph spec with the given name.
func (m Manifest) Graph(name string) (Graph, bool) {
	for _, g := range m.Graphs {
		if g.Name == name {
			return g, true
		}
	}
	return Graph{}, false
}
