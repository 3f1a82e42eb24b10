package storetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
)

// JSON documents, strings and named objects.

type manifest struct {
	Format string            `json:"format"`
	Graphs []artifacts.Ref   `json:"graphs"`
	Info   map[string]string `json:"info"`
}

func testJSON(t *testing.T, s artifacts.Store) {
	in := manifest{
		Format: "tunefleet.test/v1",
		Graphs: []artifacts.Ref{{SHA256: strings.Repeat("0", 64), Size: 1}, {SHA256: strings.Repeat("f", 64), Size: 2}},
		Info:   map[string]string{"gpu": "H100", "ünïcode": "✓"},
	}
	key := artifacts.StateKey("run-1")
	if err := artifacts.PutJSON(t.Context(), s, key, in); err != nil {
		t.Fatalf("PutJSON: %v", err)
	}
	var out manifest
	if err := artifacts.GetJSON(t.Context(), s, key, &out); err != nil {
		t.Fatalf("GetJSON: %v", err)
	}
	if out.Format != in.Format || !slices.Equal(out.Graphs, in.Graphs) || out.Info["ünïcode"] != "✓" || len(out.Info) != 2 {
		t.Fatalf("GetJSON = %+v, want %+v", out, in)
	}
	if raw := get(t, s, key); !bytes.Contains(raw, []byte("\n  \"format\"")) {
		t.Errorf("stored JSON is not indented:\n%s", raw)
	}

	put(t, s, "bad.json", []byte("{not json"))
	err := artifacts.GetJSON(t.Context(), s, "bad.json", &out)
	if err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Fatalf("GetJSON of invalid JSON = %v, want an error naming the key", err)
	}
	if err := artifacts.PutJSON(t.Context(), s, "chan.json", make(chan int)); err == nil {
		t.Fatal("PutJSON of an unencodable value succeeded")
	}
	if _, err := s.Stat(t.Context(), "chan.json"); !errors.Is(err, artifacts.ErrNotExist) {
		t.Fatalf("a failed PutJSON left an object: %v", err)
	}
}

func testString(t *testing.T, s artifacts.Store) {
	if s.String() == "" {
		t.Fatal("String() is empty")
	}
	if err := s.Check(t.Context()); err != nil {
		t.Fatalf("Check on a working store: %v", err)
	}
}

// testNamedObjects: UploadFile and DownloadFile, for objects whose key
// is a name (timing caches, published results), of a size that is more
// than one multipart part.
func testNamedObjects(t *testing.T, s artifacts.Store) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "cache")
	want, err := io.ReadAll(stream(7, 17*mib))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, want, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := artifacts.UploadFile(ctx, s, "timing-caches/p/c.cache", src); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "fetched")
	if err := artifacts.DownloadFile(ctx, s, "timing-caches/p/c.cache", dest); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dest); !bytes.Equal(got, want) {
		t.Fatalf("downloaded %d bytes, not the %d uploaded", len(got), len(want))
	}
	// Missing: ErrNotExist, and no file left behind.
	missing := filepath.Join(dir, "missing")
	if err := artifacts.DownloadFile(ctx, s, "timing-caches/p/none", missing); !errors.Is(err, artifacts.ErrNotExist) {
		t.Fatalf("download of a missing key: %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed download left %s: %v", missing, err)
	}
}
