package bundlestore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/bundlestore"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/storegc"
)

// A bundle pushed to a real S3 server (versitygw) comes back whole from
// every form of reference a fleet file may use, a second push sends no
// file again, and a tampered blob or a missing bundle is refused.
func TestPushFetchOnS3(t *testing.T) {
	ctx := context.Background()
	cfg := testsvc.S3(t)
	store, err := artifacts.NewS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	storeURL := fmt.Sprintf("s3://%s?endpoint=%s&region=%s", cfg.Bucket, cfg.Endpoint, cfg.Region)
	dir := bundletest.Write(t, bundletest.WithModel("demo_model"))
	b, err := bundle.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := b.Digest()
	key, err := bundlestore.Push(ctx, store, b)
	if err != nil {
		t.Fatal(err)
	}
	if wantKey := "bundles/demo_model/sha256-" + strings.TrimPrefix(want, "sha256:") + ".json"; key != wantKey {
		t.Errorf("key %s, want %s", key, wantKey)
	}

	for _, ref := range []string{"store:" + key, "store:bundles/demo_model", "s3://" + cfg.Bucket + "/" + key, "s3://" + cfg.Bucket + "/bundles/demo_model"} {
		k, err := bundlestore.Key(ref, storeURL)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		got, cleanup, err := bundlestore.FetchTemp(ctx, store, k)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if d, _ := got.Digest(); d != want || got.Manifest.Model != "demo_model" {
			t.Errorf("%s: fetched %s of model %s, want %s of demo_model", ref, d, got.Manifest.Model, want)
		}
		cleanup()
	}

	for _, ref := range []string{"s3://another-bucket/bundles/demo_model", "store:bundles/../runs/x", "store:models/demo_model", "bundles/demo_model"} {
		if _, err := bundlestore.Key(ref, storeURL); !errors.Is(err, bundlestore.ErrBadRef) {
			t.Errorf("Key(%q) = %v, want ErrBadRef", ref, err)
		}
	}
	if _, _, err := bundlestore.FetchTemp(ctx, store, bundlestore.LatestKey("nobody")); !errors.Is(err, bundlestore.ErrBadRef) {
		t.Errorf("a bundle never pushed: %v, want ErrBadRef", err)
	}

	// A blob replaced behind the index: the fetch verifies every file.
	files, _ := b.Files()
	bad := artifacts.Ref{SHA256: files[len(files)-1].SHA256, Size: files[len(files)-1].Size}
	junk := strings.Repeat("x", int(bad.Size))
	if err := store.Put(ctx, bad.Key(), strings.NewReader(junk), int64(len(junk))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := bundlestore.FetchTemp(ctx, store, key); err == nil {
		t.Error("a tampered blob was fetched without complaint")
	}
}

// The index must not lead a fetch outside its directory.
func TestFetchRefusesEscapingPaths(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	store, err := artifacts.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	files := []bundle.FileDigest{{Path: "../../etc/x", SHA256: strings.Repeat("a", 64), Size: 1}}
	idx := bundlestore.Index{Format: bundlestore.Format, Model: "m", Digest: bundle.DigestOf(files), Files: files}
	if err := artifacts.PutJSON(ctx, store, bundlestore.LatestKey("m"), idx); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "b")
	if _, err := bundlestore.Fetch(ctx, store, bundlestore.LatestKey("m"), dest); err == nil || !strings.Contains(err.Error(), "leaves the bundle") {
		t.Errorf("escaping path: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dest, "..", "..", "etc", "x")); err == nil {
		t.Error("a file was written outside the bundle")
	}
}

// ReadIndex and GraphCount tell a nightly what a stored bundle is without
// fetching it; an index or bundle.json that says otherwise than its files
// is refused, naming the key.
func TestReadIndex(t *testing.T) {
	ctx := context.Background()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Open(bundletest.Write(t, bundletest.WithModel("m")))
	if err != nil {
		t.Fatal(err)
	}
	key, err := bundlestore.Push(ctx, store, b)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := bundlestore.ReadIndex(ctx, store, key)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := b.Digest(); idx.Digest != want || idx.Model != "m" {
		t.Errorf("index %s of %s, want %s of m", idx.Digest, idx.Model, want)
	}
	if n, err := idx.GraphCount(ctx, store); err != nil || n != len(b.Manifest.Graphs) || n == 0 || idx.Graphs != n {
		t.Errorf("GraphCount = %d, %v (the index's graphs %d); want %d", n, err, idx.Graphs, len(b.Manifest.Graphs))
	}
	// An index pushed before the count was recorded: from bundle.json.
	old := idx
	old.Graphs = 0
	if n, err := old.GraphCount(ctx, store); err != nil || n != len(b.Manifest.Graphs) {
		t.Errorf("GraphCount of an index without graphs = %d, %v; want %d", n, err, len(b.Manifest.Graphs))
	}

	// Each a corruption of what was pushed; want is in its error.
	manifest := slices.IndexFunc(idx.Files, func(f bundle.FileDigest) bool { return f.Path == bundle.ManifestName })
	for _, tc := range []struct {
		name  string
		index func(*bundlestore.Index)
		blob  string // bundle.json's stored bytes, when replaced
		want  string
	}{
		{name: "another digest", index: func(i *bundlestore.Index) { i.Digest = "sha256:" + strings.Repeat("0", 64) }, want: "the index says"},
		{name: "a file dropped", index: func(i *bundlestore.Index) { i.Files = i.Files[1:] }, want: "the index says"},
		{name: "another model", index: func(i *bundlestore.Index) { i.Model = "m2" }, want: `is model "m"`},
		{name: "bundle.json replaced", blob: `{"model":"m","graphs":[]}`, want: "not what the index names"},
		{name: "no bundle.json", index: func(i *bundlestore.Index) {
			i.Files = slices.Delete(slices.Clone(i.Files), manifest, manifest+1)
			i.Digest = bundle.DigestOf(i.Files)
		}, want: "lists no bundle.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := old // bundle.json is read
			bad.Files = slices.Clone(idx.Files)
			if tc.index != nil {
				tc.index(&bad)
			}
			k := bundlestore.LatestKey("t-" + strings.ReplaceAll(tc.name, " ", "-"))
			if err := artifacts.PutJSON(ctx, store, k, bad); err != nil {
				t.Fatal(err)
			}
			if tc.blob != "" {
				blob := artifacts.BlobKey(idx.Files[manifest].SHA256)
				orig, err := artifacts.ReadObject(ctx, store, blob, bundle.MaxManifestBytes)
				if err != nil {
					t.Fatal(err)
				}
				store.Put(ctx, blob, strings.NewReader(tc.blob), int64(len(tc.blob)))
				defer store.Put(ctx, blob, strings.NewReader(string(orig)), int64(len(orig)))
			}
			got, err := bundlestore.ReadIndex(ctx, store, k)
			if err == nil {
				_, err = got.GraphCount(ctx, store)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// A pushed bundle is kept by `producer gc`: its index names its blobs, so
// the store's mark and sweep counts them as reachable, however old.
func TestStoredBundleSurvivesGC(t *testing.T) {
	ctx := context.Background()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Open(bundletest.Write(t, bundletest.WithModel("demo_model")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bundlestore.Push(ctx, store, b); err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return time.Now().Add(365 * 24 * time.Hour) }
	plan, err := storegc.Collect(ctx, store, storegc.Options{Now: later})
	if err != nil {
		t.Fatal(err)
	}
	files, _ := b.Files()
	if len(plan.Blobs) != 0 || plan.MarkedBlobs != len(files) {
		t.Errorf("gc would delete %d blobs and keeps %d; want none deleted, the bundle's %d kept", len(plan.Blobs), plan.MarkedBlobs, len(files))
	}
}
