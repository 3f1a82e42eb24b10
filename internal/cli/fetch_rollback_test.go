package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/cli"
)

// Freshness of what fetch --verify-key resolves as the newest: it goes
// through the signed latest pointer, whose sequence goes up with each
// move. latest.json pointed back at an older, genuinely signed run is
// refused as a rollback; so is the older run's signed pointer replayed
// whole, against the sequence this machine has seen or --min-sequence;
// a pointer older than --max-age is refused as stale; latest.json with no
// signed pointer is refused. Each exits 4 and writes nothing; --run still
// verifies the older run alone.
func TestFetchRefusesRollback(t *testing.T) {
	t.Parallel()
	needORT(t)
	dir := t.TempDir()
	key, pub := writeKeyPair(t, dir, "k", "ed25519")
	store, storeDir, first := signedRun(t, dir, key)
	seen := filepath.Join(dir, "seen.json")
	fetch := func(name string, extra ...string) outcome {
		t.Helper()
		out := filepath.Join(dir, "out-"+name)
		o := producer(t, append([]string{"fetch", "tests.Tanh", "--platform", "cpu", "--store", store, "--out", out, "--verify-key", pub, "--seen", seen}, extra...)...)
		if o.code != cli.ExitOK {
			wantAbsent(t, out)
		}
		return o
	}
	o := fetch("first")
	o.wantCode(t, cli.ExitOK)
	if !strings.Contains(o.stdout, "signed latest pointer verified: sequence 1") {
		t.Errorf("the first fetch does not say the pointer's sequence:\n%s", o)
	}
	latestKey := filepath.Join(storeDir, filepath.FromSlash(artifacts.LatestKey("tests.Tanh", "cpu")))
	pointerKey := filepath.Join(storeDir, filepath.FromSlash(artifacts.LatestPointerKey("tests.Tanh", "cpu")))
	oldLatest, err := os.ReadFile(latestKey)
	if err != nil {
		t.Fatal(err)
	}
	oldPointer, err := os.ReadFile(pointerKey)
	if err != nil {
		t.Fatal(err)
	}
	// A newer run, signed: the pointer moves to sequence 2.
	producer(t, "submit", filepath.Join(dir, "bundle"), "--target", "cpu", "--candidates", "ort:cpu:basic", "--strategy", "first-wins",
		"--bench-time", benchTime, "--store", store, "--sign-key", key, "--force").wantCode(t, cli.ExitOK)
	o = fetch("second")
	o.wantCode(t, cli.ExitOK)
	if !strings.Contains(o.stdout, "sequence 2") || strings.Contains(o.stdout, "run "+first+":") {
		t.Errorf("the second fetch is not the newer run at sequence 2:\n%s", o)
	}
	newLatest, _ := os.ReadFile(latestKey)
	newPointer, _ := os.ReadFile(pointerKey)
	restore := func() {
		os.WriteFile(latestKey, newLatest, 0o644)
		os.WriteFile(pointerKey, newPointer, 0o644)
	}

	for _, tc := range []struct {
		name   string
		tamper func()
		extra  []string
		want   []string
	}{
		{name: "latest.json pointed back", tamper: func() { os.WriteFile(latestKey, oldLatest, 0o644) },
			want: []string{"verification failed (rollback)", "names run " + first, "latest.json was moved without a signature"}},
		{name: "old pointer replayed", tamper: func() { os.WriteFile(latestKey, oldLatest, 0o644); os.WriteFile(pointerKey, oldPointer, 0o644) },
			want: []string{"verification failed (rollback)", "at sequence 1, older than sequence 2 already seen", "fetch --run " + first}},
		{name: "old pointer replayed, new machine with --min-sequence", tamper: func() { os.WriteFile(latestKey, oldLatest, 0o644); os.WriteFile(pointerKey, oldPointer, 0o644) },
			extra: []string{"--seen", filepath.Join(dir, "fresh-seen.json"), "--min-sequence", "2"},
			want:  []string{"verification failed (rollback)", "older than sequence 2 already seen"}},
		{name: "stale pointer", extra: []string{"--max-age", "1ns"},
			want: []string{"verification failed (stale)", "more than --max-age 1ns ago"}},
		{name: "no signed pointer", tamper: func() { os.Remove(pointerKey) },
			want: []string{"verification failed (signature)", "there is no signed pointer", "fetch --run"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer restore()
			if tc.tamper != nil {
				tc.tamper()
			}
			fetch(strings.ReplaceAll(tc.name, " ", "-"), tc.extra...).wantError(t, "producer", cli.ExitVerify, tc.want...)
		})
	}
	// The older run, asked for by name, still verifies alone.
	o = fetch("by-run", "--run", first)
	o.wantCode(t, cli.ExitOK)
}
