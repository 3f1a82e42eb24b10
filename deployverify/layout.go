package deployverify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/provenance"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/triton"
)

// LayoutAttestationFile is where fetch lays out the attestation of the
// layout it wrote (provenance.SignLayout: every file by its path there),
// beside AttestationFile (the run's own, by the store's names).
const LayoutAttestationFile = "tunefleet.intoto.jsonl"

// Layouts are the layouts a done run can be fetched in, in the order
// finalize signs them.
var Layouts = []string{LayoutTunefleet, LayoutTriton, LayoutAITune}

// Files is every file a directory fetched in layout holds but the
// attestations, by its slash-separated path there → its sha256: what
// finalize signs for that layout. The layout is deterministic from the
// state (stateData: its exact bytes): the tunefleet layout is state.json
// and engines/<graph>/<file>; Triton's adds each model's config.pbtxt and
// graphs.json, generated from the state and the ONNX engines' inputs and
// outputs (readIO), and moves the engines into <model>_<graph>/1/; the
// AITune layout is the checkpoint's files. A layout the run has none of
// (no checkpoint; a winner Triton cannot serve) is ErrNoLayout.
func Files(st *state.State, stateData []byte, layout string, readIO triton.GraphIOFunc) (map[string]string, error) {
	files := map[string]string{}
	switch layout {
	case LayoutTunefleet:
		files[artifacts.StateFile] = sha(stateData)
		for _, g := range st.Graphs {
			if g.Engine == nil {
				return nil, fmt.Errorf("%w: graph %s has no engine", ErrNoLayout, g.Name)
			}
			files[path.Join("engines", g.Name, path.Base(g.Engine.File))] = g.Engine.SHA256
			for _, d := range g.Engine.Data {
				files[path.Join("engines", g.Name, d.File)] = d.SHA256
			}
		}
	case LayoutTriton:
		gen, eng, err := triton.Files(st, readIO)
		if errors.Is(err, triton.ErrUnservable) {
			return nil, fmt.Errorf("%w: %w", ErrNoLayout, err)
		}
		if err != nil {
			return nil, err // an engine that could not be read: not a layout the run lacks
		}
		for f, b := range gen {
			files[f] = sha(b)
		}
		for f, d := range eng {
			files[f] = d
		}
		files[artifacts.StateFile] = sha(stateData)
	case LayoutAITune:
		cp := st.AITune
		if cp == nil || cp.Error != "" || cp.Skipped != "" || len(cp.Files) == 0 {
			return nil, fmt.Errorf("%w: run %s has no AITune checkpoint", ErrNoLayout, st.Run)
		}
		for _, f := range cp.Files {
			files[f.Path] = f.SHA256
		}
	default:
		return nil, fmt.Errorf("layout %q: want %s, %s or %s", layout, LayoutTunefleet, LayoutTriton, LayoutAITune)
	}
	return files, nil
}

// ErrNoLayout marks a layout a run cannot be fetched in (so finalize
// signs none for it).
var ErrNoLayout = errors.New("no such layout")

// CheckLayout checks dir (named as shown in messages) against its layout's
// attestation (jsonl, DIR/tunefleet.intoto.jsonl): the envelope naming
// every file of layout must be signed by a verify key, every file in dir
// (but the attestations) must be one of its subjects with its digest, and
// every subject must be there. It is what `producer verify` runs on a
// directory, and what fetch runs on what it staged before it lays the
// directory out. Refusals wrap provenance.ErrRefused.
func CheckLayout(ctx context.Context, dir, shown, layout string, jsonl []byte, keys []*provenance.Verifier) (*Report, error) {
	v, err := provenance.VerifyLayout(ctx, path.Join(shown, LayoutAttestationFile), jsonl, keys, layout)
	if err != nil {
		return nil, err
	}
	files, err := listFiles(dir)
	if err != nil {
		return nil, err
	}
	r := &Report{Dir: shown, Layout: layout, Run: v.Run(), KeyID: v.KeyID, Files: files}
	for _, f := range files {
		want, ok := v.Subjects[f]
		if !ok {
			return nil, fmt.Errorf("%w (digest): %s/%s is not a subject of the signed %s layout of run %s: refusing the directory", provenance.ErrRefused, shown, f, layout, r.Run)
		}
		got, err := fileSHA(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		if got != want {
			return nil, fmt.Errorf("%w (digest): %s/%s has sha256 %s, the signed %s layout of run %s says %s for it: it was changed or swapped after finalize signed it", provenance.ErrRefused, shown, f, got, layout, r.Run, want)
		}
	}
	for _, f := range slices.Sorted(keysOf(v.Subjects)) {
		if !has(files, f) {
			return nil, fmt.Errorf("%w (digest): %s/%s is missing: the signed %s layout of run %s holds it", provenance.ErrRefused, shown, f, layout, r.Run)
		}
	}
	return r, nil
}

// fileSHA is a file's sha256, read as a stream (engines are large).
func fileSHA(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func keysOf(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
