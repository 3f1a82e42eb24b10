package deployverify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/provenance"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/triton"
)

// AttestationFile is where fetch lays the run's envelope out in DIR (the
// one name: internal/cli's fetch writes it, Verify reads it).
const AttestationFile = "attestation.intoto.jsonl"

// The layouts a fetched directory may have.
const (
	LayoutTunefleet = "tunefleet"
	LayoutTriton    = "triton"
	LayoutAITune    = "aitune"
)

// Report is what a directory that verified holds.
type Report struct {
	Dir    string `json:"dir"`
	Layout string `json:"layout"`
	Run    string `json:"run"`
	KeyID  string `json:"key_id"`
	// Files is every file checked (relative, slash-separated), sorted.
	Files []string `json:"files"`
	// Note says what a directory that verified lacks, if anything (one
	// fetched from a run signed before layouts were).
	Note string `json:"note,omitempty"`
}

// Dir verifies dir against the verify keys. A refusal wraps
// provenance.ErrRefused and names its check (key, signature, digest); a
// directory that is not a fetched layout at all, or that cannot be read,
// is another error.
func Dir(ctx context.Context, dir string, keys []*provenance.Verifier) (*Report, error) {
	// The layout's own attestation, when fetch laid one out, names every
	// file by its path here: nothing needs regenerating.
	if jsonl, err := os.ReadFile(filepath.Join(dir, LayoutAttestationFile)); err == nil {
		files, err := listFiles(dir)
		if err != nil {
			return nil, err
		}
		return CheckLayout(ctx, dir, dir, layoutOf(files), jsonl, keys)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	r, err := dirByState(ctx, dir, keys)
	if r != nil {
		r.Note = fmt.Sprintf("%s has no %s (its run was signed before finalize signed each layout): checked against the run's own %s, with the files this layout generates regenerated from the signed state; a verifier that matches files to subjects by digest alone (cosign) can check only state.json and the engines", dir, LayoutAttestationFile, AttestationFile)
	}
	return r, err
}

// layoutOf tells a fetched directory's layout by what is in it.
func layoutOf(files []string) string {
	switch {
	case has(files, triton.MapFile):
		return LayoutTriton
	case has(files, artifacts.StateFile):
		return LayoutTunefleet
	}
	return LayoutAITune
}

// dirByState verifies a directory fetched from a run signed before
// layouts were: against the run's Statement, which names the state and
// engines by the store's names.
func dirByState(ctx context.Context, dir string, keys []*provenance.Verifier) (*Report, error) {
	env, err := os.ReadFile(filepath.Join(dir, AttestationFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w (signature): %s has neither %s nor %s: fetch it with --verify-key, which lays the run's signed provenance out beside what it fetched",
				provenance.ErrRefused, dir, LayoutAttestationFile, AttestationFile)
		}
		return nil, err
	}
	v, err := provenance.Verify(ctx, filepath.Join(dir, AttestationFile), env, keys)
	if err != nil {
		return nil, err
	}
	files, err := listFiles(dir)
	if err != nil {
		return nil, err
	}
	r := &Report{Dir: dir, KeyID: v.KeyID, Files: files}
	// What each file must be: its bytes (generated) or its sha256.
	generated := map[string][]byte{}
	digests := map[string]string{}
	switch r.Layout = layoutOf(files); r.Layout {
	case LayoutTriton:
		st, data, err := signedState(dir, v)
		if err != nil {
			return nil, err
		}
		r.Run = st.Run
		digests[artifacts.StateFile] = sha(data)
		gen, eng, err := triton.Expected(st, dir)
		if err != nil {
			// A model file that is not the ONNX its config is made from
			// (swapped for another file) fails here or below, by digest.
			return nil, fmt.Errorf("%w (digest): %s: the repository is not the one the signed state lays out: %w", provenance.ErrRefused, dir, err)
		}
		maps.Copy(digests, eng)
		generated = gen
	case LayoutTunefleet:
		st, data, err := signedState(dir, v)
		if err != nil {
			return nil, err
		}
		r.Run = st.Run
		digests[artifacts.StateFile] = sha(data)
		for _, g := range st.Graphs {
			if g.Engine == nil {
				continue
			}
			digests["engines/"+g.Name+"/"+filepath.Base(g.Engine.File)] = g.Engine.SHA256
			for _, d := range g.Engine.Data {
				digests["engines/"+g.Name+"/"+d.File] = d.SHA256
			}
		}
	default:
		r.Run = v.Run()
		for name, d := range v.Subjects {
			if rel, ok := strings.CutPrefix(name, "aitune/"); ok {
				digests[rel] = d
			}
		}
	}
	for _, f := range files {
		want, isGenerated := generated[f]
		d, isDigest := digests[f]
		if !isGenerated && !isDigest {
			return nil, fmt.Errorf("%w (digest): %s/%s is not part of what run %s's signed provenance lays out in the %s layout: refusing the directory", provenance.ErrRefused, dir, f, r.Run, r.Layout)
		}
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		if isGenerated && !bytes.Equal(got, want) {
			return nil, fmt.Errorf("%w (digest): %s/%s is not what the signed state of run %s generates: it was changed after fetch wrote it", provenance.ErrRefused, dir, f, r.Run)
		}
		if isDigest && sha(got) != d {
			return nil, fmt.Errorf("%w (digest): %s/%s has sha256 %s, the signed provenance of run %s says %s for it: it was changed or swapped after fetch wrote it", provenance.ErrRefused, dir, f, sha(got), r.Run, d)
		}
	}
	for _, f := range slices.Sorted(iterKeys(digests, generated)) {
		if !has(files, f) {
			return nil, fmt.Errorf("%w (digest): %s/%s is missing: the %s layout of run %s holds it", provenance.ErrRefused, dir, f, r.Layout, r.Run)
		}
	}
	return r, nil
}

// signedState reads DIR/state.json and checks it is the state the
// verified provenance names, with every engine a subject.
func signedState(dir string, v *provenance.Verified) (*state.State, []byte, error) {
	data, err := os.ReadFile(filepath.Join(dir, artifacts.StateFile))
	if err != nil {
		return nil, nil, err
	}
	var st state.State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, nil, fmt.Errorf("%w (digest): %s/%s: %w", provenance.ErrRefused, dir, artifacts.StateFile, err)
	}
	if err := v.CheckState(&st, data, false); err != nil {
		return nil, nil, err
	}
	return &st, data, nil
}

// listFiles is every regular file under dir but the attestation,
// relative and slash-separated, sorted; anything else (a link, a device)
// is refused, since nothing signed is one.
func listFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if !d.Type().IsRegular() {
			return fmt.Errorf("%w (digest): %s/%s is not a regular file: nothing signed is one", provenance.ErrRefused, dir, rel)
		}
		if rel != AttestationFile && rel != LayoutAttestationFile {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

func has(sorted []string, x string) bool {
	_, ok := slices.BinarySearch(sorted, x)
	return ok
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// iterKeys yields the keys of both maps.
func iterKeys(a map[string]string, b map[string][]byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range a {
			if !yield(k) {
				return
			}
		}
		for k := range b {
			if !yield(k) {
				return
			}
		}
	}
}
