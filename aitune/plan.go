package aitune

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
)

// What Write checks and plans before it writes: each graph matched with its
// block entry and bundle declaration.

// graphPlan is one graph, checked and ready to write.
type graphPlan struct {
	g         Graph
	bg        *BlockGraph
	profiles  []shapes.Profile
	relocated *relocation // ONNX Runtime with ExternalData: the rewritten model
	files     BackendFiles
}

// plan checks graphs against the block before anything is written.
func plan(block *Block, graphs []Graph) ([]graphPlan, error) {
	var probs []string
	add := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	seen := map[string]bool{}
	var plans []graphPlan
	for i, g := range graphs {
		where := fmt.Sprintf("graph %q", g.Name)
		bg, ok := block.Graph(g.Name)
		switch {
		case !ok:
			add("graphs[%d]: the aitune block does not describe graph %q", i, g.Name)
			continue
		case seen[g.Name]:
			add("%s: given twice", where)
			continue
		}
		seen[g.Name] = true
		if g.Decl.Name != g.Name {
			add("%s: its declaration is named %q", where, g.Decl.Name)
		}
		for _, p := range checkDecl(bg, g.Decl) {
			add("%s: %s", where, p)
		}
		if st, err := os.Stat(g.EngineFile); err != nil {
			add("%s: engine file: %v", where, err)
		} else if !st.Mode().IsRegular() {
			add("%s: engine file %s is not a regular file", where, g.EngineFile)
		}
		p := graphPlan{g: g, bg: bg}
		switch g.Backend {
		case BackendTRT:
			if g.ONNXDataFile != "" || len(g.ExternalData) > 0 || g.ExecutionProvider != "" {
				add("%s: ONNXDataFile, ExternalData and ExecutionProvider are for ONNX Runtime, not TensorRT", where)
			}
			profiles, err := trtProfiles(bg, g)
			if err != nil {
				add("%s: %v", where, err)
			}
			p.profiles = profiles
		case BackendORT:
			if g.Profiles != nil {
				add("%s: optimization profiles are for TensorRT, not ONNX Runtime", where)
			}
			if g.ExecutionProvider != "" && g.ExecutionProvider != "cuda" && g.ExecutionProvider != "tensorrt" {
				add("%s: execution provider %q is not one AITune's ONNXRuntimeBackend has (\"\", \"cuda\", \"tensorrt\")", where, g.ExecutionProvider)
			}
			if g.ONNXDataFile != "" && len(g.ExternalData) > 0 {
				add("%s: give ONNXDataFile or ExternalData, not both", where)
			}
			if len(g.ExternalData) > 0 {
				r, err := relocateExternal(g.EngineFile, g.ExternalData)
				if err != nil {
					add("%s: %v", where, err)
				}
				p.relocated = r
			}
			if g.ONNXDataFile != "" {
				if st, err := os.Stat(g.ONNXDataFile); err != nil {
					add("%s: ONNX data file: %v", where, err)
				} else if !st.Mode().IsRegular() {
					add("%s: ONNX data file %s is not a regular file", where, g.ONNXDataFile)
				}
			}
		default:
			add("%s: backend %q is not %q or %q (the backends AITune can load from a foreign checkpoint)", where, g.Backend, BackendTRT, BackendORT)
		}
		plans = append(plans, p)
	}
	for _, bg := range block.Graphs {
		if !seen[bg.Graph] {
			add("graph %q has no engine: AITune loads a module only with every graph tuned", bg.Graph)
		}
	}
	if len(probs) > 0 {
		if len(probs) == 1 {
			return nil, errors.New("aitune: " + probs[0])
		}
		return nil, fmt.Errorf("aitune: cannot write the checkpoint (%d problems):\n  - %s", len(probs), strings.Join(probs, "\n  - "))
	}
	return plans, nil
}

// checkDecl checks a graph declaration against the block's description of
// it: the same tensors, and ranks that fit the multipliers and explicit
// dims. ParseBlock ran the same checks on bundle.json's declarations;
// Write runs them again on the declarations it is given.
func checkDecl(bg *BlockGraph, decl bundle.Graph) []string {
	var probs []string
	check := func(kind string, ts []TensorLocator, decls []bundle.TensorDecl) {
		for _, d := range decls {
			if !slices.ContainsFunc(ts, func(t TensorLocator) bool { return t.Name == d.Name }) {
				probs = append(probs, fmt.Sprintf("%s %q has no locator in the aitune block", kind, d.Name))
			}
			if _, ok := torchDType[d.DType]; !ok {
				probs = append(probs, fmt.Sprintf("%s %q: dtype %q has no torch equivalent", kind, d.Name, d.DType))
			}
			if err := shapes.ValidateSpec(d.TensorSpec); err != nil {
				probs = append(probs, err.Error())
			}
		}
		for _, t := range ts {
			d, ok := findDecl(decls, t.Name)
			switch {
			case !ok:
				probs = append(probs, fmt.Sprintf("the aitune block has a locator for %s %q, which is not declared", kind, t.Name))
			case t.Multipliers != nil && len(t.Multipliers) != d.Rank():
				probs = append(probs, fmt.Sprintf("%s %q has rank %d, its bs_multipliers %d entries", kind, t.Name, d.Rank(), len(t.Multipliers)))
			}
		}
	}
	check("input", bg.Inputs, decl.Inputs)
	check("output", bg.Outputs, decl.Outputs)
	for _, t := range bg.Inputs {
		d, ok := findDecl(decl.Inputs, t.Name)
		if dims, explicit := bg.dimsFor(t); ok && explicit && len(dims) != d.Rank() {
			probs = append(probs, fmt.Sprintf("input %q has rank %d, its dynamic shape %d dims", t.Name, d.Rank(), len(dims)))
		}
	}
	return probs
}
