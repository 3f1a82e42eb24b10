package cli_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
)

// TestNightlyKeepsDigestsBetweenRuns: a nightly run once a night (cron)
// keeps its bundle files' digests in --digest-cache, and the next run
// takes an unchanged file's digest from there instead of reading the
// file (a digest planted in the cache is what the next night's plan
// says); a damaged cache is a warning, not the night's end; "" keeps
// none.
func TestNightlyKeepsDigestsBetweenRuns(t *testing.T) {
	dir := mlpBundle(t)
	// A digest is remembered once its file's last change is 2 s old.
	time.Sleep(2100 * time.Millisecond)
	url := testsvc.OwnRedis(t, testsvc.RedisOptions{}).URL
	if err := runstate.RegisterPlatforms(context.Background(), redisClient(t, url), []string{"cpu"}, []string{"cpu-test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	f := fleetFile(t, mlpFleet(dir, "cpu", ""))
	store := "file://" + t.TempDir()
	cache := filepath.Join(t.TempDir(), "cache", "digests.json")
	type entry struct {
		Model, Outcome, Error string
		BundleDigest          string `json:"bundle_digest"`
	}
	// night runs one nightly as a new process would: nothing remembered.
	night := func(date, digestCache string, code int) (entry, outcome) {
		t.Helper()
		bundle.ForgetDigests()
		o := producer(t, "nightly", "--fleet", f, "--redis", url, "--store", store, "--date", date, "-o", "json", "--digest-cache", digestCache)
		o.wantCode(t, code)
		var plan struct{ Entries []entry }
		if err := json.Unmarshal([]byte(o.stdout), &plan); err != nil || len(plan.Entries) != 1 {
			t.Fatalf("plan: %v\n%s", err, o)
		}
		return plan.Entries[0], o
	}
	first, _ := night("2026-12-01", cache, cli.ExitOK)
	if first.Outcome != "submitted" {
		t.Fatalf("the first night: %+v", first)
	}
	// The cache names every file of the bundle by its identity.
	var kept struct {
		Format string
		Files  []struct {
			Ino    uint64 `json:"ino"`
			SHA256 string `json:"sha256"`
		}
	}
	data, err := os.ReadFile(cache)
	if err != nil || json.Unmarshal(data, &kept) != nil || kept.Format != bundle.DigestCacheFormat {
		t.Fatalf("the digest cache: %v\n%s", err, data)
	}
	if fi, err := os.Stat(cache); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the digest cache's mode: %v %v, want 0600", fi, err)
	}
	byIno := map[uint64]int{}
	for i, k := range kept.Files {
		byIno[k.Ino] = i
	}
	var onnx uint64
	files := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		files++
		fi, _ := d.Info()
		ino := fi.Sys().(*syscall.Stat_t).Ino
		if _, ok := byIno[ino]; !ok {
			t.Errorf("the digest cache does not name %s", p)
		}
		if strings.HasSuffix(p, ".onnx") {
			onnx = ino
		}
		return nil
	})
	if len(kept.Files) != files || onnx == 0 {
		t.Fatalf("the digest cache holds %d files, the bundle %d (ONNX inode %d)", len(kept.Files), files, onnx)
	}

	// Unchanged, the next night has the same digest, from the cache.
	if second, _ := night("2026-12-02", cache, cli.ExitOK); second.BundleDigest != first.BundleDigest {
		t.Fatalf("the unchanged night: %+v, want the digest %s", second, first.BundleDigest)
	}
	// A digest planted for the ONNX file is what the next night uses: it
	var raw map[string]any
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber() // nanoseconds and inodes past float64's precision
	if err := dec.Decode(&raw); err != nil {
		t.Fatal(err)
	}
	raw["files"].([]any)[byIno[onnx]].(map[string]any)["sha256"] = strings.Repeat("0", 64)
	planted, _ := json.Marshal(raw)
	os.WriteFile(cache, planted, 0o600)
	// did not read the file to learn it; uploading it, it did, and the
	// bytes do not match: the entry fails, naming the file, and nothing
	// lands in the store under a digest its bytes do not have.
	third, _ := night("2026-12-03", cache, cli.ExitFailed)
	if third.BundleDigest == first.BundleDigest || third.Outcome != "failed" ||
		!strings.Contains(third.Error, "model.onnx") || !strings.Contains(third.Error, "does not match its digest (sha256 "+strings.Repeat("0", 64)+" expected") {
		t.Fatalf("the night after a digest was planted: %+v; want the planted digest used and the upload refused", third)
	}
	if _, err := os.Stat(filepath.Join(strings.TrimPrefix(store, "file://"), filepath.FromSlash(artifacts.BlobKey(strings.Repeat("0", 64))))); !os.IsNotExist(err) {
		t.Errorf("a blob under the planted digest: %v", err)
	}

	// A damaged cache: a warning naming it, and the night goes on.
	os.WriteFile(cache, []byte("{"), 0o600)
	fourth, o := night("2026-12-04", cache, cli.ExitOK)
	if fourth.BundleDigest != first.BundleDigest || !strings.Contains(o.stderr, cache) || !strings.Contains(o.stderr, "remove it") {
		t.Fatalf("a damaged cache: %+v\n%s", fourth, o)
	}
	// "" keeps none.
	none := filepath.Join(t.TempDir(), "none.json")
	t.Setenv(cli.DigestCacheEnv, none)
	if _, o := night("2026-12-05", "", cli.ExitOK); o.stderr != "" {
		t.Fatalf("--digest-cache \"\": %s", o)
	}
	if _, err := os.Stat(none); !os.IsNotExist(err) {
		t.Fatalf("--digest-cache \"\" wrote %s (%v)", none, err)
	}
}
