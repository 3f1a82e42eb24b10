package bundle_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
)

// TestMemo: a settled bundle opened again through a Memo is the bundle
// remembered (its manifest shared, not read again); a changed file (here a
// sample made invalid) makes it read and validated again, a bundle
// changed just now is not remembered until it settles, and a bundle.json
// of another model is seen.
func TestMemo(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("file identities are known on Linux only")
	}
	settle := 50 * time.Millisecond
	t.Cleanup(bundle.SetSettleTime(settle))
	dir := bundletest.Write(t, bundletest.WithModel("m"))
	time.Sleep(2 * settle)
	m := &bundle.Memo{}
	open := func() *bundle.Bundle {
		t.Helper()
		b, err := m.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	same := func(a, b *bundle.Bundle) bool { return &a.Manifest.Graphs[0] == &b.Manifest.Graphs[0] }
	first := open()
	again := open()
	if !same(first, again) {
		t.Fatal("an unchanged, settled bundle was read again")
	}
	d1, err1 := first.Digest()
	d2, err2 := again.Digest()
	if err1 != nil || err2 != nil || d1 != d2 {
		t.Fatalf("digests %s (%v) and %s (%v) of the same bundle", d1, err1, d2, err2)
	}

	// A sample rewritten with bytes that do not decode, of the same size.
	sample := filepath.Join(dir, filepath.FromSlash(first.Manifest.Graphs[0].Samples[0]), "input_0.pb")
	good, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, len(good))
	for i := range junk {
		junk[i] = 0xff
	}
	if err := os.WriteFile(sample, junk, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open(dir); !bundle.IsInvalid(err) {
		t.Fatalf("a bundle whose sample was made invalid opened: %v", err)
	}
	// Restored: valid again, but changed just now, so read every time
	// until it settles.
	if err := os.WriteFile(sample, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if a, b := open(), open(); same(a, b) || same(a, first) {
		t.Error("a bundle changed just now was remembered")
	}
	time.Sleep(2 * settle)
	if a, b := open(), open(); !same(a, b) || same(a, first) {
		t.Error("the settled bundle was not remembered anew")
	}

	// Another model's bundle.json.
	man := first.Manifest
	man.Model = "m2"
	bundletest.WriteManifest(t, dir, man)
	if b := open(); b.Manifest.Model != "m2" {
		t.Errorf("bundle.json changed to model m2, opened as %s", b.Manifest.Model)
	}

	var none *bundle.Memo
	if b, err := none.Open(dir); err != nil || b.Manifest.Model != "m2" {
		t.Errorf("a nil Memo: %v, %v", b, err)
	}
}
