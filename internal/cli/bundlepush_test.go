package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
)

// `producer bundle push` stores a bundle in a real S3 store (versitygw)
// and prints its key; a fleet file that names it (by that key, by
// bundles/MODEL, or as s3://BUCKET/KEY) validates against the store with
// no copy of the bundle on disk, which is what the nightly CronJob needs
// (no shared volume).
func TestBundlePushAndFleetFromStore(t *testing.T) {
	needORT(t)
	store, s3 := s3Store(t)
	dir := bundletest.Write(t, bundletest.WithModel("demo_model"))

	push := producer(t, "bundle", "push", dir, "--store", store)
	push.wantCode(t, cli.ExitOK)
	key := strings.TrimSpace(push.stdout)
	if !strings.HasPrefix(key, "bundles/demo_model/sha256-") || !strings.HasSuffix(key, ".json") {
		t.Fatalf("push printed %q, want bundles/demo_model/sha256-HEX.json", key)
	}
	os.RemoveAll(dir) // the store's copy is all there is now

	fleetDir := t.TempDir()
	for _, ref := range []string{"store:" + key, "store:bundles/demo_model", "s3://" + s3.Bucket + "/" + key} {
		f := filepath.Join(fleetDir, "fleet.yaml")
		os.WriteFile(f, []byte("format: tunefleet.fleet/v1\ndefaults:\n  targets: [cpu]\n  candidates: [ort:cpu:basic]\nmodels:\n  - model: demo_model\n    bundle: "+ref+"\n"), 0o644)
		producer(t, "fleet", "validate", f, "--store", store).wantCode(t, cli.ExitOK)
	}
	// A model never pushed: the user's to fix (exit 2), named.
	f := filepath.Join(fleetDir, "fleet.yaml")
	os.WriteFile(f, []byte("format: tunefleet.fleet/v1\ndefaults:\n  targets: [cpu]\n  candidates: [ort:cpu:basic]\nmodels:\n  - model: other\n    bundle: store:bundles/other\n"), 0o644)
	o := producer(t, "fleet", "validate", f, "--store", store)
	o.wantCode(t, cli.ExitUsage)
	if !strings.Contains(o.stderr, "no stored bundle at bundles/other/latest.json") {
		t.Errorf("stderr does not name the missing bundle:\n%s", o.stderr)
	}
}

// The nightly a CronJob runs reads its bundle from the store alone: no
// copy on disk, real Redis and a real S3 server; its tasks are queued.
func TestNightlyFromStoredBundle(t *testing.T) {
	needORT(t)
	store, s3 := s3Store(t)
	url := testsvc.Redis(t)
	rdb := redisClient(t, url)
	ctx := context.Background()
	if err := runstate.RegisterPlatforms(ctx, rdb, []string{"cpu"}, []string{"cpu-test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	dir := bundletest.Write(t, bundletest.WithModel("demo_model"))
	producer(t, "bundle", "push", dir, "--store", store).wantCode(t, cli.ExitOK)
	os.RemoveAll(dir)

	f := filepath.Join(t.TempDir(), "fleet.yaml")
	os.WriteFile(f, []byte("format: tunefleet.fleet/v1\ndefaults:\n  targets: [cpu]\n  candidates: [ort:cpu:basic]\nmodels:\n  - model: demo_model\n    bundle: s3://"+s3.Bucket+"/bundles/demo_model\n"), 0o644)
	producer(t, "nightly", "--fleet", f, "--redis", url, "--store", store).wantCode(t, cli.ExitOK)
	if n, err := rdb.LLen(ctx, "asynq:{cpu}:pending").Result(); err != nil || n == 0 {
		t.Errorf("%d tasks pending on cpu after the nightly (%v), want the bundle's graphs", n, err)
	}
}
