package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/fsutil"

	"github.com/tunefleet/tunefleet/state"
)

// ErrNotFetchable marks a state that exists but cannot be deployed: its run
// failed, it is another model's or platform's, or it has no checkpoint.
var ErrNotFetchable = errors.New("not fetchable")

// StateFile is the name of the module state manifest in a fetched folder.
const StateFile = "state.json"

// Fetched is what Fetch laid out.
type Fetched struct {
	Dir     string            `json:"dir"`
	Run     string            `json:"run"`
	State   string            `json:"state"`   // path of state.json
	Engines map[string]string `json:"engines"` // graph → engine path
	// Requires names the graphs whose engines are tied to the hardware
	// that built it, with what they need (state.json's requires).
	Requires map[string]*state.Requires `json:"requires,omitempty"`
}

// ReadState reads the module state of a model on a platform: the given
// run's, or (run == "") the one latest.json points at, whose digest is
// checked. It returns the state and its exact bytes.
func ReadState(ctx context.Context, s Store, model, platform, run string) (*state.State, []byte, error) {
	return readState(ctx, s, model, platform, run, nil)
}

// readState is ReadState resolving through latest (when run == "") instead
// of latest.json: a pointer the caller has verified (a signed one).
func readState(ctx context.Context, s Store, model, platform, run string, latest *state.Latest) (*state.State, []byte, error) {
	key := StateKey(run)
	want := ""
	if run == "" {
		var l state.Latest
		if latest != nil {
			l = *latest
		} else if err := GetJSON(ctx, s, LatestKey(model, platform), &l); err != nil {
			if errors.Is(err, ErrNotExist) {
				return nil, nil, latestMissing(ctx, s, model, platform)
			}
			return nil, nil, err
		}
		key, want, run = l.StateKey, l.StateSHA256, l.Run
	}
	data, err := ReadObject(ctx, s, key, MaxJSONSize)
	if err != nil {
		if want != "" && errors.Is(err, ErrNotExist) {
			// latest.json names a state blob that is gone; the run's own
			// state.json may still be there.
			return nil, nil, fmt.Errorf("%s names run %s, whose state %s is missing: try fetch --run %s: %w",
				LatestKey(model, platform), run, key, run, err)
		}
		return nil, nil, fmt.Errorf("state of run %s: %w", run, err)
	}
	if want != "" {
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != want {
			return nil, nil, fmt.Errorf("verification failed (digest): %s is corrupt: sha256 %s, latest.json says %s: %w", key, got, want, ErrCorrupt)
		}
	}
	var st state.State
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&st); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", key, err)
	}
	if st.Format != state.StateFormat {
		return nil, nil, fmt.Errorf("%s: format %q, want %q", key, st.Format, state.StateFormat)
	}
	if st.Model != model || (platform != st.Platform && platform != st.Target) {
		return nil, nil, fmt.Errorf("run %s is model %q on platform %q (target %q), not %q on %q: %w", run, st.Model, st.Platform, st.Target, model, platform, ErrNotFetchable)
	}
	return &st, data, nil
}

// Fetch downloads a module state and every engine it names into dir (which
// must not exist or be empty), verifying every checksum:
//
//	dir/state.json
//	dir/engines/<graph>/<engine file>
//
// It stages everything beside dir and renames it into place last, so a
// failed fetch leaves nothing behind.
func Fetch(ctx context.Context, s Store, model, platform, run, dir string) (*Fetched, error) {
	return FetchWith(ctx, s, model, platform, run, dir, FetchOptions{})
}

// FetchOptions adds to a fetch what deploy tooling asks of it beyond the
// checksums (package provenance's signature checks, another layout).
type FetchOptions struct {
	// Check runs on the resolved state and its exact bytes before anything
	// is downloaded or written: an error ends the fetch with nothing
	// written. It returns files to lay out beside the state (name → bytes,
	// e.g. the run's signed provenance).
	Check func(st *state.State, data []byte) (map[string][]byte, error)
	// Layout, when set, rearranges the complete staged folder (state.json,
	// engines/<graph>/<file>, Check's files) before it is renamed into
	// place; its error leaves nothing behind.
	Layout func(st *state.State, stage string) error
	// Seal, when set, runs on the complete staged folder last (after
	// Layout), with the state: a check of what was laid out (package
	// deployverify's, against the layout's signed attestation) whose error
	// leaves nothing behind.
	Seal func(st *state.State, stage string) error
	// Latest, when set, is the pointer a fetch without a run resolves
	// through instead of latest.json (deploy tooling's verified, signed
	// pointer).
	Latest *state.Latest
}

// FetchWith is Fetch with options.
func FetchWith(ctx context.Context, s Store, model, platform, run, dir string, o FetchOptions) (*Fetched, error) {
	st, data, err := readState(ctx, s, model, platform, run, o.Latest)
	if err != nil {
		return nil, err
	}
	if st.Status != "done" {
		return nil, fmt.Errorf("run %s did not succeed (%s): %v: %w", st.Run, st.Status, st.Reasons, ErrNotFetchable)
	}
	extra, err := o.check(st, data)
	if err != nil {
		return nil, err
	}
	stage, err := newStage(dir)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	out := &Fetched{Dir: dir, Run: st.Run, State: filepath.Join(dir, StateFile), Engines: map[string]string{}}
	var blobs []fetchJob
	var total int64
	for _, g := range st.Graphs {
		if g.Engine == nil {
			return nil, fmt.Errorf("state of run %s: graph %s has no engine", st.Run, g.Name)
		}
		if err := CheckKey(g.Name); err != nil || CheckKey(g.Engine.File) != nil {
			return nil, fmt.Errorf("state of run %s: unsafe graph or engine name %q/%q", st.Run, g.Name, g.Engine.File)
		}
		if g.Requires != nil {
			if out.Requires == nil {
				out.Requires = map[string]*state.Requires{}
			}
			out.Requires[g.Name] = g.Requires
		}
		rel := filepath.Join("engines", g.Name, filepath.Base(g.Engine.File))
		blobs = append(blobs, fetchJob{what: "engine of graph " + g.Name, ref: Ref{SHA256: g.Engine.SHA256, Size: g.Engine.Size}, dest: filepath.Join(stage, rel)})
		total += g.Engine.Size
		out.Engines[g.Name] = filepath.Join(dir, rel)
		for _, d := range g.Engine.Data {
			if err := CheckKey(d.File); err != nil || d.File == filepath.Base(g.Engine.File) {
				return nil, fmt.Errorf("state of run %s: graph %s: unsafe engine data name %q", st.Run, g.Name, d.File)
			}
			blobs = append(blobs, fetchJob{what: "engine data " + d.File + " of graph " + g.Name, ref: Ref{SHA256: d.SHA256, Size: d.Size},
				dest: filepath.Join(stage, "engines", g.Name, filepath.FromSlash(d.File))})
			total += d.Size
		}
	}
	progressFrom(ctx).Expect(total)
	if err := fetchAll(ctx, s, blobs, fetchConcurrency); err != nil {
		return nil, err
	}
	for _, g := range st.Graphs {
		if err := checkEngineData(st.Run, g, filepath.Join(stage, "engines", g.Name)); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(stage, StateFile), data, 0o644); err != nil {
		return nil, err
	}
	if err := writeExtra(stage, extra); err != nil {
		return nil, err
	}
	if o.Layout != nil {
		if err := o.Layout(st, stage); err != nil {
			return nil, err
		}
	}
	if o.Seal != nil {
		if err := o.Seal(st, stage); err != nil {
			return nil, err
		}
	}
	if err := commitStage(stage, dir); err != nil {
		return nil, err
	}
	return out, nil
}

// ErrMissingEngineData marks a state whose engine names files it reads
// beside itself (an ONNX engine's external data) that the state does not
// carry: fetched, the engine would not load. Runs tuned before engines
// carried their data have such states.
var ErrMissingEngineData = errors.New("engine data missing")

// checkEngineData refuses an ONNX engine (fetched into dir) that names
// external data the state did not bring: fetched, it would not load
// ("cannot get file size"), while every checksum verified.
func checkEngineData(run string, g state.StateGraph, dir string) error {
	if !strings.EqualFold(filepath.Ext(g.Engine.File), ".onnx") {
		return nil // a TensorRT plan or another engine is self-contained
	}
	gio, err := bundle.ReadGraphIO(filepath.Join(dir, filepath.Base(g.Engine.File)))
	if err != nil {
		// Not an ONNX model this can walk: what it references cannot be
		// told, and its checksum verified; loading it is its consumer's.
		return nil
	}
	var missing []string
	for _, loc := range gio.ExternalData {
		if !slices.ContainsFunc(g.Engine.Data, func(d state.EngineDataRef) bool { return path.Clean(d.File) == path.Clean(loc) }) {
			missing = append(missing, strconv.Quote(loc))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: the engine of graph %s of run %s reads external data %s that the run did not store, so it would not load; tune the model again with this version (producer submit --force), which stores an engine's data with it",
			ErrMissingEngineData, g.Name, run, strings.Join(missing, ", "))
	}
	return nil
}

func (o FetchOptions) check(st *state.State, data []byte) (map[string][]byte, error) {
	if o.Check == nil {
		return nil, nil
	}
	return o.Check(st, data)
}

// writeExtra writes Check's files into the stage (plain names only).
func writeExtra(stage string, files map[string][]byte) error {
	for name, b := range files {
		if name == "" || name != filepath.Base(name) || name == StateFile {
			return fmt.Errorf("fetch: bad extra file name %q", name)
		}
		if err := os.WriteFile(filepath.Join(stage, name), b, 0o644); err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
	}
	return nil
}

// FetchCheckpoint downloads a run's AITune checkpoint into dir (which must
// not exist or be empty), verifying every file, so that
// ait.load(module, name, storage=LocalTorchStorage(base_folder=dir)) reads
// it. The state is resolved as in Fetch.
func FetchCheckpoint(ctx context.Context, s Store, model, platform, run, dir string) (*state.Checkpoint, error) {
	return FetchCheckpointWith(ctx, s, model, platform, run, dir, FetchOptions{})
}

// FetchCheckpointWith is FetchCheckpoint with options (Layout is not
// used: the checkpoint's layout is AITune's; Seal is).
func FetchCheckpointWith(ctx context.Context, s Store, model, platform, run, dir string, o FetchOptions) (*state.Checkpoint, error) {
	st, data, err := readState(ctx, s, model, platform, run, o.Latest)
	if err != nil {
		return nil, err
	}
	cp := st.AITune
	switch {
	case cp == nil:
		return nil, fmt.Errorf("run %s has no AITune checkpoint: its bundle carried no aitune block: %w", st.Run, ErrNotFetchable)
	case cp.Error != "":
		return nil, fmt.Errorf("run %s: its AITune checkpoint could not be written: %s: %w", st.Run, cp.Error, ErrNotFetchable)
	case cp.Skipped != "":
		return nil, fmt.Errorf("run %s has no AITune checkpoint: %s: %w", st.Run, cp.Skipped, ErrNotFetchable)
	}
	extra, err := o.check(st, data)
	if err != nil {
		return nil, err
	}
	stage, err := newStage(dir)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	for _, f := range cp.Files {
		if err := CheckKey(f.Path); err != nil {
			return nil, fmt.Errorf("checkpoint of run %s: %w", st.Run, err)
		}
		dest := filepath.Join(stage, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return nil, err
		}
		if err := fetchKey(ctx, s, cp.Prefix+f.Path, Ref{SHA256: f.SHA256, Size: f.Size}, dest); err != nil {
			return nil, err
		}
	}
	if err := writeExtra(stage, extra); err != nil {
		return nil, err
	}
	if o.Seal != nil {
		if err := o.Seal(st, stage); err != nil {
			return nil, err
		}
	}
	if err := commitStage(stage, dir); err != nil {
		return nil, err
	}
	return cp, nil
}

// fetchConcurrency is how many engines Fetch downloads at once.
const fetchConcurrency = 4

// fetchJob is one blob for fetchAll to download.
type fetchJob struct {
	what string // for errors: "engine of graph 0"
	ref  Ref
	dest string
}

// fetchAll downloads the blobs (FetchFile), limit at a time; the first
// failure cancels the rest and is returned.
func fetchAll(ctx context.Context, s Store, jobs []fetchJob, limit int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for _, j := range jobs {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("fetch: %w", err) // an earlier one failed, or the caller gave up
			}
			err := os.MkdirAll(filepath.Dir(j.dest), 0o755)
			if err == nil {
				// Written to disk as it comes: commitStage fsyncs
				// the stage before the rename.
				err = fetchFile(ctx, s, j.ref, j.dest, true)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", j.what, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// fetchKey downloads an object that is not a blob (its key is not its
// digest) and verifies it against the digest recorded for it.
func fetchKey(ctx context.Context, s Store, key string, want Ref, dest string) error {
	// A negative size would lift the download's bound.
	if err := want.Validate(); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	f, err := os.Create(dest)
	if err != nil {
		return fmt.Errorf("download %s: %w", key, err)
	}
	// Read at most one byte past the recorded size: enough to tell it is
	// too long, without filling the disk with whatever the object holds.
	// Written back as it comes: commitStage fsyncs the stage.
	got, n, err := downloadHashed(ctx, s, key, want.Size, f, true)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dest)
		if errors.Is(err, ErrNotExist) {
			return err
		}
		return fmt.Errorf("download %s: %w", key, err)
	}
	if got != want.SHA256 || n != want.Size {
		// Not the store's trouble to retry: the bytes are there and are not
		// the ones the state names (tampered, or rotted).
		return fmt.Errorf("verification failed (digest): %s is corrupt or truncated: sha256 %s (%d bytes), state.json says %s (%d bytes): %w", key, got, n, want.SHA256, want.Size, ErrCorrupt)
	}
	return nil
}

// newStage makes the staging directory of a fetch into dir, beside it, so
// that the final rename is atomic; dir must not exist or be empty.
// ErrBadDestination marks a fetch destination that is not a new or empty
// directory: the caller's to change.
var ErrBadDestination = errors.New("fetch")

func newStage(dir string) (string, error) {
	// Only a missing path or a real, empty directory may be replaced: never
	// a file, nor a symbolic link (whatever it points at).
	switch fi, err := os.Lstat(dir); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", fmt.Errorf("fetch: %w", err)
	case !fi.IsDir():
		return "", fmt.Errorf("%w: %s exists and is not a directory; name a new or empty directory", ErrBadDestination, dir)
	default:
		if entries, err := os.ReadDir(dir); err != nil {
			return "", fmt.Errorf("fetch: %w", err)
		} else if len(entries) > 0 {
			return "", fmt.Errorf("%w: %s exists and is not empty; name a new or empty directory", ErrBadDestination, dir)
		}
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(parent, "."+filepath.Base(dir)+".fetching-")
}

// commitStage moves a complete staging directory to dir (replacing an
// empty one).
func commitStage(stage, dir string) error {
	if err := fsutil.SyncTree(stage); err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	// newStage allowed only an empty, real directory here; Go's Rename will
	// not replace a directory, so it goes first (Remove leaves a non-empty
	// one, and the rename then fails).
	if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
		os.Remove(dir)
	}
	if err := os.Rename(stage, dir); err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	fsutil.SyncDir(filepath.Dir(filepath.Clean(dir)))
	return nil
}
