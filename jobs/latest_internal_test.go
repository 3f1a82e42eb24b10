package jobs

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/provenance"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/state"
)

// slowGets widens the window between moveLatest's read and its write, as
// a slow S3 does.
type slowGets struct{ artifacts.Store }

func (s slowGets) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	time.Sleep(10 * time.Millisecond)
	return s.Store.Get(ctx, key)
}

func testRuns(t *testing.T) *runstate.Runs {
	t.Helper()
	mr := miniredis.RunT(t)
	mr.ClockTTL(true)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return runstate.NewRuns(rdb)
}

// Runs of one model and platform finalizing at once: latest.json ends at
// the newest submission, whatever order the finalizes run in.
func TestConcurrentFinalizesLeaveTheNewestLatest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	local, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := slowGets{local}
	runs := testRuns(t)
	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The newest run starts its finalize first, so without the lock
			// older ones read before it writes and then write over it.
			time.Sleep(time.Duration(n-i) * time.Millisecond)
			errs[i] = moveLatest(ctx, runs, store, nil, state.Latest{
				Format: state.LatestFormat, Model: "m", Platform: "p", Run: fmt.Sprintf("run-%d", i),
				SubmittedAt: base.Add(time.Duration(i) * time.Minute),
			})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var got state.Latest
	if err := artifacts.GetJSON(ctx, store, artifacts.LatestKey("m", "p"), &got); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("run-%d", n-1); got.Run != want {
		t.Fatalf("latest.json names %s, want the newest submission %s", got.Run, want)
	}
	if got.Sequence < 1 || got.Sequence > n || got.MovedAt.IsZero() {
		t.Errorf("latest.json's sequence %d (moved at %s): want 1 to %d and a time", got.Sequence, got.MovedAt, n)
	}
}

// Each move of the pointer takes the next sequence, and with a signer the
// signed pointer beside latest.json says the same run, state and
// sequence; finalizing the same run again moves nothing on.
func TestSignedPointerSequence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	runs := testRuns(t)
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	signer, err := provenance.ParseSigner(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := provenance.ParseVerifier(signer.PublicPEM())
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	move := func(run string, i int) {
		t.Helper()
		sha := fmt.Sprintf("%064x", i)
		if err := moveLatest(ctx, runs, store, signer, state.Latest{Format: state.LatestFormat, Model: "m", Platform: "p", Run: run,
			StateKey: "blobs/sha256/" + sha, StateSHA256: sha, SubmittedAt: base.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		run  string
		i    int
		want int64
	}{{"run-1", 1, 1}, {"run-1", 1, 1}, {"run-2", 2, 2}, {"run-0", 0, 2}, {"run-3", 3, 3}} {
		move(tc.run, tc.i)
		var l state.Latest
		if err := artifacts.GetJSON(ctx, store, artifacts.LatestKey("m", "p"), &l); err != nil {
			t.Fatal(err)
		}
		env, err := artifacts.ReadObject(ctx, store, artifacts.LatestPointerKey("m", "p"), artifacts.MaxJSONSize)
		if err != nil {
			t.Fatal(err)
		}
		p, err := provenance.VerifyPointer(ctx, "pointer", env, []*provenance.Verifier{verifier}, "m", "p")
		if err != nil {
			t.Fatal(err)
		}
		if l.Sequence != tc.want || p.Sequence != tc.want || p.Run != l.Run || p.StateSHA256 != l.StateSHA256 {
			t.Errorf("after moving to %s: latest.json %s at sequence %d, signed pointer %s at %d; want sequence %d on both", tc.run, l.Run, l.Sequence, p.Run, p.Sequence, tc.want)
		}
	}
}
