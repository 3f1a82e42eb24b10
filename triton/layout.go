package triton

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/state"
)

// Files of the repository besides the models. Triton only loads the
// repository's directories, so files at its root are left alone.
const (
	// MapFile maps each graph spec to its Triton model.
	MapFile = "graphs.json"
	// MapFormat is the version of graphs.json.
	MapFormat = "tunefleet.triton/v1"
	// ConfigFile is each model's configuration.
	ConfigFile = "config.pbtxt"
	// Version is the one model version a repository holds.
	Version = "1"
)

// Map is graphs.json: which Triton model serves which graph spec. A module
// with several graph specs (AITune routes each call by its inputs'
// structure, never through a pipeline) is several independent Triton
// models, not an ensemble: an ensemble chains models, and these are
// alternatives. A deploy script routes as AITune does: the graph spec a
// call matches names the model to send it to.
type Map struct {
	Format   string     `json:"format"`
	Model    string     `json:"model"`
	Platform string     `json:"platform"`
	Run      string     `json:"run"`
	Graphs   []MapGraph `json:"graphs"`
}

// MapGraph is one graph spec's model.
type MapGraph struct {
	Graph        string  `json:"graph"`        // the graph spec's name (AITune's: "0", "1", …)
	TritonModel  string  `json:"triton_model"` // the model directory and the name clients call
	Candidate    string  `json:"candidate"`    // the winner it serves
	Config       *Config `json:"config"`
	EngineSHA256 string  `json:"engine_sha256"`
	// Requires is what a machine needs to serve the model (state.Requires;
	// absent when any machine of the platform's kind can).
	Requires *state.Requires `json:"requires,omitempty"`
}

// ErrUnservable marks a state Triton cannot serve as tuned (a tensor it
// cannot declare, a winner with no Triton platform): not deployable here.
var ErrUnservable = errors.New("not servable by Triton")

// Repository is what Layout wrote.
type Repository struct {
	Map    Map
	Models []string // model directories, relative to the repository
}

// ModelName is the Triton model of a graph spec: its export name,
// "<model>_<graph>" with every run of characters other than letters,
// digits, '_' and '-' replaced by '_' (AITune's "tests.MLP" graph "0" is
// "tests_MLP_0"). bundle.Open refuses names that would collide or not fit
// a directory, so a tuned run always lays out.
func ModelName(model, graph string) string { return bundle.ExportName(model, graph) }

// Layout turns a fetched folder (state.json and engines/<graph>/<file>,
// package artifacts' layout) into a Triton model repository in place:
//
//	<model>_<graph>/config.pbtxt
//	<model>_<graph>/1/model.onnx | model.plan
//	graphs.json
//	state.json
//
// It is artifacts.FetchOptions.Layout's shape: the folder is a stage that
// appears only when Layout succeeds.
func Layout(st *state.State, dir string) (*Repository, error) {
	repo, models, err := plan(st, fileIO(func(g state.StateGraph) string {
		return filepath.Join(dir, "engines", g.Name, filepath.Base(g.Engine.File))
	}))
	if err != nil {
		return nil, err
	}
	for _, m := range models {
		g := m.graph
		vdir := filepath.Join(dir, m.name, Version)
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return nil, fmt.Errorf("triton: %w", err)
		}
		if err := os.Rename(filepath.Join(dir, "engines", g.Name, filepath.Base(g.Engine.File)), filepath.Join(vdir, m.cfg.File)); err != nil {
			return nil, fmt.Errorf("triton: %w", err)
		}
		// An ONNX engine's external data goes beside it: the model names
		// it by a path relative to its own folder, which is 1/ now.
		for _, d := range g.Engine.Data {
			dst := filepath.Join(vdir, filepath.FromSlash(d.File))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return nil, fmt.Errorf("triton: %w", err)
			}
			if err := os.Rename(filepath.Join(dir, "engines", g.Name, filepath.FromSlash(d.File)), dst); err != nil {
				return nil, fmt.Errorf("triton: graph %s: engine data %s: %w", g.Name, d.File, err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, m.name, ConfigFile), []byte(m.cfg.Text()), 0o644); err != nil {
			return nil, fmt.Errorf("triton: %w", err)
		}
	}
	if err := os.RemoveAll(filepath.Join(dir, "engines")); err != nil {
		return nil, fmt.Errorf("triton: %w", err)
	}
	b, err := repo.Map.JSON()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, MapFile), b, 0o644); err != nil {
		return nil, fmt.Errorf("triton: %w", err)
	}
	return repo, nil
}

// JSON is graphs.json's bytes, as Layout writes them.
func (m Map) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// model is one graph spec's Triton model, planned.
type model struct {
	graph state.StateGraph
	name  string
	cfg   *Config
}

// GraphIOFunc reads an ONNX engine's inputs and outputs (the engine of
// the graph given), wherever its bytes are: a fetched folder, the store.
type GraphIOFunc func(g state.StateGraph) (bundle.GraphIO, error)

// fileIO reads each engine from the file enginePath names.
func fileIO(enginePath func(state.StateGraph) string) GraphIOFunc {
	return func(g state.StateGraph) (bundle.GraphIO, error) { return bundle.ReadGraphIO(enginePath(g)) }
}

// plan is what a repository of st holds, the ONNX engines' inputs and
// outputs read by readIO: Layout's plan, Expected's and Files', so that
// what a verifier or a signer expects is what Layout wrote.
func plan(st *state.State, readIO GraphIOFunc) (*Repository, []model, error) {
	repo := &Repository{Map: Map{Format: MapFormat, Model: st.Model, Platform: st.Platform, Run: st.Run}}
	var models []model
	used := map[string]string{}
	for _, g := range st.Graphs {
		if g.Engine == nil {
			return nil, nil, fmt.Errorf("triton: graph %s has no engine", g.Name)
		}
		name := ModelName(st.Model, g.Name)
		if other, dup := used[name]; dup {
			return nil, nil, fmt.Errorf("triton: graphs %q and %q both map to Triton model %q; rename one", other, g.Name, name)
		}
		used[name] = g.Name
		var io *bundle.GraphIO
		if strings.HasPrefix(g.Candidate, "ort") {
			gio, err := readIO(g)
			if err != nil {
				return nil, nil, fmt.Errorf("triton: graph %s: read its engine: %w", g.Name, err)
			}
			io = &gio
		}
		cfg, err := NewConfig(name, st, g, io)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: run %s: %w", ErrUnservable, st.Run, err)
		}
		models = append(models, model{graph: g, name: name, cfg: cfg})
		repo.Models = append(repo.Models, name)
		repo.Map.Graphs = append(repo.Map.Graphs, MapGraph{
			Graph: g.Name, TritonModel: name, Candidate: g.Candidate, Config: cfg, EngineSHA256: g.Engine.SHA256, Requires: g.Requires,
		})
	}
	return repo, models, nil
}

// Expected is what a repository Layout wrote for st holds, for a verifier
// with nothing else at hand: the files Layout generates (each model's
// config.pbtxt, graphs.json) by their bytes, and the engines and their
// external data by the sha256 the state names, each by its path in the
// repository (slash-separated, relative to dir). An ONNX engine is read
// from the repository for its inputs and outputs, as Layout read it.
func Expected(st *state.State, dir string) (generated map[string][]byte, digests map[string]string, err error) {
	return Files(st, fileIO(func(g state.StateGraph) string {
		return filepath.Join(dir, ModelName(st.Model, g.Name), Version, engineFile(g))
	}))
}

// Files is Expected with the ONNX engines' inputs and outputs read by
// readIO: what finalize signs as the repository's files (it reads the
// engines from the store, with no repository laid out yet).
func Files(st *state.State, readIO GraphIOFunc) (generated map[string][]byte, digests map[string]string, err error) {
	repo, models, err := plan(st, readIO)
	if err != nil {
		return nil, nil, err
	}
	generated, digests = map[string][]byte{}, map[string]string{}
	for _, m := range models {
		generated[m.name+"/"+ConfigFile] = []byte(m.cfg.Text())
		digests[m.name+"/"+Version+"/"+m.cfg.File] = m.graph.Engine.SHA256
		for _, d := range m.graph.Engine.Data {
			digests[m.name+"/"+Version+"/"+d.File] = d.SHA256
		}
	}
	if generated[MapFile], err = repo.Map.JSON(); err != nil {
		return nil, nil, err
	}
	return generated, digests, nil
}

// engineFile is the file a graph's engine has in its model's version
// folder: what NewConfig names for its backend.
func engineFile(g state.StateGraph) string {
	if strings.HasPrefix(g.Candidate, "trt") {
		return PlanFile
	}
	return ONNXFile
}
