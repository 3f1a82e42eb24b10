package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestDigestCache: an unchanged file's digest is remembered once its last
// change has settled; a file rewritten with other bytes of the same size
// gets its new digest; a file changed just now is not remembered.
func TestDigestCache(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("digests are remembered on Linux only")
	}
	old := settleTime
	settleTime = 50 * time.Millisecond
	t.Cleanup(func() { settleTime = old })
	p := filepath.Join(t.TempDir(), "model.onnx")
	write := func(b string) {
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	digest := func() string {
		sum, _, err := sha256FileCached(p)
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	isRemembered := func() bool {
		id, ok := identify(p)
		remembered.Lock()
		defer remembered.Unlock()
		_, hit := remembered.m[id]
		return ok && hit
	}
	want := func(b string) string {
		sum := sha256.Sum256([]byte(b))
		return hex.EncodeToString(sum[:])
	}

	write("aaaa")
	if got := digest(); got != want("aaaa") || isRemembered() {
		t.Fatalf("a file changed just now: digest %s (want %s), remembered %v (want false)", got, want("aaaa"), isRemembered())
	}
	time.Sleep(2 * settleTime) // past the settle time, and many clock ticks
	if got := digest(); got != want("aaaa") || !isRemembered() {
		t.Fatalf("a settled file: digest %s, remembered %v; want %s, remembered", got, isRemembered(), want("aaaa"))
	}
	write("bbbb") // same size, other bytes: its change time moves
	if got := digest(); got != want("bbbb") {
		t.Fatalf("after a same-size rewrite the digest is %s, want the new bytes' %s", got, want("bbbb"))
	}
	// The file's mtime set back to what it was: its change time still tells.
	time.Sleep(2 * settleTime)
	before, _ := identify(p)
	digest()
	write("cccc")
	mt := time.Unix(0, before.mtime)
	if err := os.Chtimes(p, mt, mt); err != nil {
		t.Fatal(err)
	}
	if got := digest(); got != want("cccc") {
		t.Fatalf("a rewrite with its mtime set back: digest %s, want %s", got, want("cccc"))
	}
}
