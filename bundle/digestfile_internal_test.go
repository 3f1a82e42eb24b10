package bundle

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func forget() { ForgetDigests() }

// TestDigestsKeptInAFile: the digests a process remembered are written to
// a file and read by the next process, which then takes an unchanged
// file's digest from it without reading the file (a digest planted in the
// file is what it answers) and hashes a changed one; what it saves is what
// runs used within keepUnused; a run that used nothing writes nothing; a
// missing file is nothing kept, a damaged one an error naming it.
func TestDigestsKeptInAFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("digests are remembered on Linux only")
	}
	old := settleTime
	settleTime = 50 * time.Millisecond
	t.Cleanup(func() { settleTime = old; forget() })
	forget()
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache", "digests.json")
	a, b := filepath.Join(dir, "a.onnx"), filepath.Join(dir, "b.bin")
	for p, data := range map[string]string{a: "aaaa", b: "bbbbbb"} {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * settleTime)
	digest := func(p string) string {
		t.Helper()
		sum, _, err := sha256FileCached(p)
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	wantA, wantB := digest(a), digest(b)
	if n, err := LoadDigests(cache); n != 0 || err != nil {
		t.Fatalf("a missing cache: %d digests, %v", n, err)
	}
	if wrote, err := SaveDigests(cache); !wrote || err != nil {
		t.Fatalf("save: wrote %v, %v", wrote, err)
	}
	if fi, err := os.Stat(cache); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the cache file: %v %v, want mode 0600", fi, err)
	}

	// Plant another digest for a: the next process answers it, so it
	// did not read a.
	var f digestCacheFile
	data, _ := os.ReadFile(cache)
	if err := json.Unmarshal(data, &f); err != nil || len(f.Files) != 2 {
		t.Fatalf("the cache holds %+v (%v), want 2 files", f, err)
	}
	planted := strings.Repeat("ab", 32)
	for i := range f.Files {
		if f.Files[i].Used < time.Now().Add(-time.Minute).Unix() {
			t.Fatalf("an entry saved now says it was used at %d", f.Files[i].Used)
		}
		if f.Files[i].SHA256 == wantA {
			f.Files[i].SHA256 = planted
		} else {
			// b's last use a month ago: past keepUnused.
			f.Files[i].Used = time.Now().Add(-30 * 24 * time.Hour).Unix()
		}
	}
	data, _ = json.Marshal(f)
	os.WriteFile(cache, data, 0o600)
	forget()
	if n, err := LoadDigests(cache); n != 2 || err != nil {
		t.Fatalf("load: %d digests, %v", n, err)
	}
	if got := digest(a); got != planted {
		t.Fatalf("an unchanged file's digest %s, want the one the cache holds (%s): the file was read", got, planted)
	}
	// Nothing computed; a used now, b last used a month ago: the file
	// is rewritten without b.
	if wrote, err := SaveDigests(cache); !wrote || err != nil {
		t.Fatalf("save: wrote %v, %v", wrote, err)
	}
	data, _ = os.ReadFile(cache)
	if strings.Contains(string(data), wantB) || !strings.Contains(string(data), planted) {
		t.Fatalf("the cache after a night that used a alone: %s", data)
	}
	// Nothing used since: nothing written.
	if wrote, err := SaveDigests(cache); wrote || err != nil {
		t.Fatalf("save with nothing new: wrote %v, %v", wrote, err)
	}
	// A run that stops before it reads a bundle (bad input) leaves the
	// file as it was.
	forget()
	LoadDigests(cache)
	if wrote, err := SaveDigests(cache); wrote || err != nil {
		t.Fatalf("save of a run that used nothing: wrote %v, %v", wrote, err)
	}
	if again, _ := os.ReadFile(cache); string(again) != string(data) {
		t.Fatalf("a run that used nothing changed the cache:\n%s\nto\n%s", data, again)
	}

	// A changed file is hashed: its identity is another.
	forget()
	LoadDigests(cache)
	if err := os.WriteFile(a, []byte("cccc"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := digest(a); got == planted || got == wantA {
		t.Fatalf("a changed file's digest %s: the cache's", got)
	}

	for name, content := range map[string]string{
		"not json":        "{",
		"another format":  `{"format":"tunefleet.other/v1","files":[]}`,
		"a bad digest":    `{"format":"tunefleet.digest-cache/v1","files":[{"dev":1,"ino":2,"size":3,"mtime_ns":4,"ctime_ns":5,"sha256":"zz"}]}`,
		"a negative size": `{"format":"tunefleet.digest-cache/v1","files":[{"dev":1,"ino":2,"size":-3,"mtime_ns":4,"ctime_ns":5,"sha256":"` + planted + `"}]}`,
	} {
		os.WriteFile(cache, []byte(content), 0o600)
		if n, err := LoadDigests(cache); err == nil || n != 0 || !strings.Contains(err.Error(), cache) {
			t.Errorf("%s: %d digests, %v; want an error naming %s", name, n, err, cache)
		}
	}
}
