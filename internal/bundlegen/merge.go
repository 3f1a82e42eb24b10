package bundlegen

import (
	"fmt"
	"path"
	"path/filepath"
	"strconv"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/shapes"
)

// Merge combines bundles into one whose graph specs are those of the
// sources in order, renamed "0", "1", … as AITune names them. Explicit
// dynamic shapes are merged; an input declared differently by two sources
// is an error.
func Merge(srcs []string, dest, model string) (*bundle.Bundle, error) {
	if len(srcs) == 0 {
		return nil, fmt.Errorf("merge: no bundles given")
	}
	if model != "" {
		if err := bundle.CheckModelName(model); err != nil {
			return nil, fmt.Errorf("--model: %w", err)
		}
	}
	w, err := bundle.NewWriter(dest)
	if err != nil {
		return nil, err
	}
	out := bundle.Manifest{Format: bundle.FormatV1, Model: model}
	for _, src := range srcs {
		b, cleanup, err := openSource(src)
		if err != nil {
			w.Abort()
			return nil, err
		}
		defer cleanup() // an unpacked archive lives until its files are copied
		if out.Model == "" {
			out.Model = b.Manifest.Model
		}
		for name, dims := range b.Manifest.DynamicShapes {
			if prev, ok := out.DynamicShapes[name]; ok && fmt.Sprint(prev) != fmt.Sprint(dims) {
				w.Abort()
				return nil, fmt.Errorf("merge: %s declares dynamic_shapes[%q] differently from an earlier bundle", src, name)
			}
			if out.DynamicShapes == nil {
				out.DynamicShapes = shapes.DynamicShapes{}
			}
			out.DynamicShapes[name] = dims
		}
		for _, g := range b.Manifest.Graphs {
			name := strconv.Itoa(len(out.Graphs))
			prefix := "graphs/" + name + "/"
			copyRel := func(rel string) (string, error) {
				p, err := bundle.Resolve(b.Dir, rel)
				if err != nil {
					return "", err
				}
				newRel := prefix + path.Clean(rel)
				return newRel, w.CopyFile(newRel, p)
			}
			ng := g
			ng.Name = name
			if ng.ONNX, err = copyRel(g.ONNX); err != nil {
				w.Abort()
				return nil, err
			}
			// External data keeps its place beside the ONNX file (ONNX
			// resolves it from there); Open derives the list again.
			for _, e := range g.ExternalData {
				if _, err := copyRel(e); err != nil {
					w.Abort()
					return nil, err
				}
			}
			ng.ExternalData = nil
			ng.Samples = nil
			for _, s := range g.Samples {
				for k := range g.Inputs {
					if _, err := copyRel(fmt.Sprintf("%s/input_%d.pb", s, k)); err != nil {
						w.Abort()
						return nil, err
					}
				}
				for k := range g.Outputs {
					if _, err := copyRel(fmt.Sprintf("%s/output_%d.pb", s, k)); err != nil {
						w.Abort()
						return nil, err
					}
				}
				ng.Samples = append(ng.Samples, prefix+filepath.ToSlash(path.Clean(s)))
			}
			out.Graphs = append(out.Graphs, ng)
		}
	}
	return w.Commit(out)
}

// openSource opens a bundle directory or archive (.tar, .tgz, .tar.gz), as
// every command that takes a bundle does; cleanup removes an unpacked
// archive.
func openSource(src string) (*bundle.Bundle, func(), error) {
	if bundle.IsArchive(src) {
		return bundle.OpenArchive(src, "")
	}
	b, err := bundle.Open(src)
	return b, func() {}, err
}
