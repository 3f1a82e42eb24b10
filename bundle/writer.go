package bundle

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tunefleet/tunefleet/internal/fsutil"
)

// Writer builds a new bundle in a staging directory beside its destination.
// Commit validates the staged bundle and renames it into place; until then
// (and after Abort) the destination does not exist, so an import that fails
// half-way leaves nothing behind.
type Writer struct {
	dest  string
	stage string
}

// NewWriter starts a bundle at dest, which must not exist yet (or be an
// empty directory).
func NewWriter(dest string) (*Writer, error) {
	if entries, err := os.ReadDir(dest); err == nil {
		if len(entries) > 0 {
			return nil, fmt.Errorf("write bundle: %s already exists and is not empty", dest)
		}
		if err := os.Remove(dest); err != nil {
			return nil, fmt.Errorf("write bundle: %w", err)
		}
	} else if !os.IsNotExist(err) {
		return nil, fmt.Errorf("write bundle: %w", err)
	}
	parent := filepath.Dir(filepath.Clean(dest))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("write bundle: %w", err)
	}
	stage, err := os.MkdirTemp(parent, "."+filepath.Base(dest)+".staging-")
	if err != nil {
		return nil, fmt.Errorf("write bundle: %w", err)
	}
	return &Writer{dest: dest, stage: stage}, nil
}

func (w *Writer) path(rel string) (string, error) {
	if err := checkRel(rel); err != nil {
		return "", err
	}
	p := filepath.Join(w.stage, filepath.FromSlash(rel))
	return p, os.MkdirAll(filepath.Dir(p), 0o755)
}

func checkRel(rel string) error {
	if rel == "" || filepath.IsAbs(rel) || filepath.Clean(rel) != filepath.FromSlash(rel) || rel == ".." || len(rel) > 2 && rel[:3] == "../" {
		return fmt.Errorf("write bundle: %q is not a clean relative path", rel)
	}
	return nil
}

// WriteFile writes data at a bundle-relative path.
func (w *Writer) WriteFile(rel string, data []byte) error {
	p, err := w.path(rel)
	if err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

// CopyFile copies a file into the bundle.
func (w *Writer) CopyFile(rel, src string) error {
	p, err := w.path(rel)
	if err != nil {
		return err
	}
	in, err := fsutil.OpenRegular(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(p)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}

// WriteTensor writes a tensor as a TensorProto file.
func (w *Writer) WriteTensor(rel string, t Tensor) error {
	b, err := EncodeTensorProto(t)
	if err != nil {
		return err
	}
	return w.WriteFile(rel, b)
}

// WriteSample writes one sample directory in the ONNX test-data layout.
func (w *Writer) WriteSample(rel string, s Sample) error {
	for k, t := range s.Inputs {
		if err := w.WriteTensor(fmt.Sprintf("%s/input_%d.pb", rel, k), t); err != nil {
			return err
		}
	}
	for k, t := range s.Outputs {
		if err := w.WriteTensor(fmt.Sprintf("%s/output_%d.pb", rel, k), t); err != nil {
			return err
		}
	}
	return nil
}

// Commit writes bundle.json, validates the staged bundle and moves it to its
// destination. On error nothing is left at the destination.
func (w *Writer) Commit(m Manifest) (*Bundle, error) {
	data, err := m.Marshal()
	if err != nil {
		w.Abort()
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(w.stage, ManifestName), data, 0o644); err != nil {
		w.Abort()
		return nil, err
	}
	b, err := Open(w.stage)
	if err != nil {
		w.Abort()
		return nil, fmt.Errorf("the bundle written for %s does not validate: %w", w.dest, err)
	}
	// Durable before it is in place: a crash leaves no bundle, or a whole one.
	if err := fsutil.SyncTree(w.stage); err != nil {
		w.Abort()
		return nil, fmt.Errorf("write bundle: %w", err)
	}
	if err := os.Rename(w.stage, w.dest); err != nil {
		w.Abort()
		return nil, fmt.Errorf("write bundle: %w", err)
	}
	fsutil.SyncDir(filepath.Dir(w.dest))
	b.Dir = w.dest
	return b, nil
}

// Abort removes the staging directory.
func (w *Writer) Abort() { os.RemoveAll(w.stage) }
