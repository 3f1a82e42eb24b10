package jobs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hibiken/asynq"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/bundle"
)

// materialize downloads the bundle files one graph needs (verified against
// their digests) and writes a bundle.json with that graph only.
func materialize(ctx context.Context, store artifacts.Store, spec *RunSpec, graph, dir string) (*bundle.Bundle, error) {
	g, ok := spec.Manifest.Graph(graph)
	if !ok {
		return nil, fmt.Errorf("run %s has no graph %q: %w", spec.Run, graph, asynq.SkipRetry)
	}
	m := spec.Manifest
	m.Graphs = []bundle.Graph{g}
	m.DynamicShapes = graphDynamicShapes(spec.Manifest, g)
	if len(m.DynamicShapes) == 0 {
		m.DynamicShapes = nil
	}
	if err := checkFree(spec, g, filepath.Dir(dir)); err != nil {
		return nil, err
	}
	var verified []bundle.FileDigest
	for _, rel := range g.Paths() {
		ref, ok := spec.Files[rel]
		if !ok {
			return nil, fmt.Errorf("run %s: run.json lists no blob for %s: %w", spec.Run, rel, asynq.SkipRetry)
		}
		// Paths came from a validated bundle; check again, since run.json
		// is read back from shared storage.
		if err := artifacts.CheckKey(rel); err != nil {
			return nil, fmt.Errorf("run %s: %w: %w", spec.Run, err, asynq.SkipRetry)
		}
		dest := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return nil, err
		}
		if err := artifacts.FetchFile(ctx, store, ref, dest); err != nil {
			return nil, err
		}
		verified = append(verified, bundle.FileDigest{Path: rel, SHA256: ref.SHA256, Size: ref.Size})
	}
	data, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, bundle.ManifestName), data, 0o644); err != nil {
		return nil, err
	}
	// Every file was just verified against run.json, written at submit
	// for a bundle that Open validated in full: the worker trusts those
	// digests instead of hashing the files again, and leaves the samples
	// to the tuner, which decodes them anyway. OpenVerified still walks
	// the ONNX file's structure (not its weights) and checks every limit
	// and external-data location, since run.json comes from shared
	// storage and a bound skipped here would cost the worker its memory.
	b, err := bundle.OpenVerified(dir, verified)
	if err != nil {
		return nil, fmt.Errorf("run %s graph %s: %w: %w", spec.Run, graph, err, asynq.SkipRetry)
	}
	return b, nil
}

// checkFree refuses a graph whose files do not fit in the work directory's
// free space before a byte is downloaded: a download that fills the
// volume gets the pod evicted (an emptyDir past its sizeLimit) or fails
// every task on the machine, and says less about why (issue 34). The
// attempt fails retryable: space may free up, or another worker with a
// bigger --work-dir take it.
func checkFree(spec *RunSpec, g bundle.Graph, workDir string) error {
	var need int64
	for _, rel := range g.Paths() {
		need += spec.Files[rel].Size
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(workDir, &st); err != nil {
		return nil // cannot tell: the download says if it does not fit
	}
	if free := int64(st.Bavail) * int64(st.Bsize); need > free {
		return fmt.Errorf("run %s graph %s: its files are %s and the work directory %s has %s free: not downloaded; give the worker a bigger --work-dir volume (the manifests' /var/lib/tunefleet) or free space",
			spec.Run, g.Name, mib(need), workDir, mib(free))
	}
	return nil
}

// mib renders a byte count for messages.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
