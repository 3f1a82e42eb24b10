package jobs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/tunefleet/tunefleet/aitune"
	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/shapes"
	"github.com/tunefleet/tunefleet/state"
)

// CheckpointPrefix is where a run's AITune checkpoint lives in the store.
func CheckpointPrefix(run string) string { return "runs/" + run + "/aitune/" }

// writeCheckpoint writes the AITune-native checkpoint of a successful run
// whose bundle carries an aitune block: the engines (TensorRT plans) or
// ONNX graphs (ONNX Runtime: AITune's backend runs the raw export on its
// own providers, so the bundle's graph, not the CPU-optimized one, is
// shipped), laid out as ait.load reads them, uploaded under
// runs/<run>/aitune/. Graphs won by ONNX Runtime on the CPU are listed
// as unmeasured (AITune's backend runs them on CUDA); a block that asks for
// GPU-class winners only gets no checkpoint from them, and the state says
// why. A checkpoint that cannot be made (the block or the
// engines do not fit AITune) is recorded in the state, not fatal: the
// tunefleet state stays valid without it. An error of the store (reading
// the engines, uploading the files) is returned: a retry may succeed, and
// a state that says "no checkpoint" because S3 blinked would be wrong.
//
// The checkpoint is staged under workDir (the worker's scratch volume:
// engines are gigabytes), never TMPDIR.
func writeCheckpoint(ctx context.Context, store artifacts.Store, workDir string, spec *RunSpec, ms *state.State) (*state.Checkpoint, error) {
	block, err := aitune.ParseBlock(spec.Manifest.AITune, spec.Manifest)
	if err != nil || block == nil {
		if err != nil {
			return &state.Checkpoint{Error: err.Error()}, nil
		}
		return nil, nil
	}
	unmeasured := unmeasuredGraphs(ms)
	if block.GPUWinnersOnly && len(unmeasured) > 0 {
		u := unmeasured[0]
		return &state.Checkpoint{Name: block.Name, Unmeasured: unmeasured, Skipped: fmt.Sprintf(
			"the aitune block asks for checkpoints from GPU-class winners only (gpu_winners_only), and graph %s won as %s: AITune would run it on %s, never measured (%d such graphs); tune for a GPU target to get a checkpoint",
			u.Graph, u.Candidate, u.DeploysOn, len(unmeasured))}, nil
	}
	cp, err := buildCheckpoint(ctx, store, workDir, spec, ms, block)
	var se storeError
	if errors.As(err, &se) {
		return nil, se.error
	}
	if err != nil {
		return &state.Checkpoint{Error: err.Error()}, nil
	}
	cp.Unmeasured = unmeasured
	return cp, nil
}

// ortCUDA is where AITune's ONNXRuntimeBackend runs a graph: it has only
// the CUDA and TensorRT execution providers, CUDA by default, and no CPU
// fallback (ONNXRuntimeBackend._get_execution_providers).
const ortCUDA = "ONNX Runtime's CUDA execution provider (AITune's ONNXRuntimeBackend has no CPU provider)"

// unmeasuredGraphs lists the graphs whose winner ran ONNX Runtime on the
// CPU: the checkpoint deploys them on CUDA, which was never measured.
func unmeasuredGraphs(ms *state.State) []state.UnmeasuredGraph {
	var out []state.UnmeasuredGraph
	for _, sg := range ms.Graphs {
		if backend, rest, _ := strings.Cut(sg.Candidate, ":"); backend == "ort" && (rest == "cpu" || strings.HasPrefix(rest, "cpu:")) {
			out = append(out, state.UnmeasuredGraph{Graph: sg.Name, Candidate: sg.Candidate, DeploysOn: ortCUDA})
		}
	}
	return out
}

// relativeTo returns the slash path rel (bundle-relative) relative to the
// directory dir (bundle-relative): how an ONNX file in dir names it.
func relativeTo(dir, rel string) string {
	if dir == "." {
		return rel
	}
	up := ""
	for d := dir; d != "." && d != "/"; d = path.Dir(d) {
		if r, ok := strings.CutPrefix(rel, d+"/"); ok {
			return up + r
		}
		up += "../"
	}
	return up + rel
}

// storeError marks an error of the store, as opposed to one of AITune's
// format, in buildCheckpoint.
type storeError struct{ error }

func buildCheckpoint(ctx context.Context, store artifacts.Store, workDir string, spec *RunSpec, ms *state.State, block *aitune.Block) (*state.Checkpoint, error) {
	tmp, err := os.MkdirTemp(workDir, "tunefleet-aitune-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var graphs []aitune.Graph
	for i, sg := range ms.Graphs {
		decl, ok := spec.Manifest.Graph(sg.Name)
		if !ok || sg.Engine == nil {
			return nil, fmt.Errorf("graph %s has no engine", sg.Name)
		}
		// The graph spec as the run left it: its inputs extended where the
		// find-max-batch step raised the max batch, as AITune's tune saves it.
		decl.Inputs = sg.Inputs
		g := aitune.Graph{Name: sg.Name, Decl: decl}
		var ref artifacts.Ref
		switch backend, _, _ := strings.Cut(sg.Candidate, ":"); backend {
		case "trt":
			g.Backend = aitune.BackendTRT
			g.Profiles = []shapes.Profile{sg.Profile}
			ref = artifacts.Ref{SHA256: sg.Engine.SHA256, Size: sg.Engine.Size}
		case "ort":
			g.Backend = aitune.BackendORT
			r, ok := spec.Files[path.Clean(decl.ONNX)]
			if !ok {
				return nil, fmt.Errorf("graph %s: run.json lists no blob for %s", sg.Name, decl.ONNX)
			}
			ref = r
		default:
			return nil, fmt.Errorf("graph %s: candidate %s has no AITune backend", sg.Name, sg.Candidate)
		}
		g.EngineFile = filepath.Join(tmp, "in", fmt.Sprint(i), "engine")
		if err := os.MkdirAll(filepath.Dir(g.EngineFile), 0o755); err != nil {
			return nil, err
		}
		if err := artifacts.FetchFile(ctx, store, ref, g.EngineFile); err != nil {
			return nil, storeError{fmt.Errorf("graph %s: %w", sg.Name, err)}
		}
		if g.Backend == aitune.BackendORT {
			// The graph's external data, as the model names it (relative
			// to the ONNX file); Write ships it as model_raw.onnx.data.
			for j, rel := range decl.ExternalData {
				r, ok := spec.Files[path.Clean(rel)]
				if !ok {
					return nil, fmt.Errorf("graph %s: run.json lists no blob for %s", sg.Name, rel)
				}
				f := aitune.ExternalFile{Location: relativeTo(path.Dir(path.Clean(decl.ONNX)), path.Clean(rel)), Path: filepath.Join(tmp, "in", fmt.Sprint(i), "data", fmt.Sprint(j))}
				if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
					return nil, err
				}
				if err := artifacts.FetchFile(ctx, store, r, f.Path); err != nil {
					return nil, storeError{fmt.Errorf("graph %s: %w", sg.Name, err)}
				}
				g.ExternalData = append(g.ExternalData, f)
			}
		}
		graphs = append(graphs, g)
	}
	out := filepath.Join(tmp, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	m, err := aitune.Write(out, block.Name, block, graphs, aitune.Options{Compress: true})
	if err != nil {
		return nil, err
	}
	cp := &state.Checkpoint{Name: m.Name, Prefix: CheckpointPrefix(spec.Run), Archive: m.Archive}
	for _, f := range m.Files {
		fh, err := os.Open(filepath.Join(out, filepath.FromSlash(f.Path)))
		if err != nil {
			return nil, err
		}
		err = store.Put(ctx, cp.Prefix+f.Path, fh, f.Size)
		fh.Close()
		if err != nil {
			return nil, storeError{fmt.Errorf("upload %s: %w", f.Path, err)}
		}
		cp.Files = append(cp.Files, state.CheckpointFile{Path: f.Path, SHA256: f.SHA256, Size: f.Size})
	}
	return cp, nil
}
