package resultindex

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// blobsFixture is a store holding an engine, a log and an AITune file, and
// a result and a state naming them.
type blobsFixture struct {
	store               artifacts.Store
	engine, log, ckpt   artifacts.Ref
	engineBytes, ckptBs []byte
	res                 *tuner.Result
	st                  *state.State
}

func newBlobsFixture(t *testing.T) *blobsFixture {
	t.Helper()
	ctx := context.Background()
	store, err := artifacts.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &blobsFixture{store: store, engineBytes: []byte("an engine, byte for byte"), ckptBs: []byte("state_dict.pt bytes")}
	if f.engine, err = artifacts.PutBytes(ctx, store, f.engineBytes); err != nil {
		t.Fatal(err)
	}
	if f.log, err = artifacts.PutBytes(ctx, store, []byte("the build log")); err != nil {
		t.Fatal(err)
	}
	const prefix = "runs/r1/aitune/"
	if err := store.Put(ctx, prefix+"m/state_dict.pt", bytes.NewReader(f.ckptBs), int64(len(f.ckptBs))); err != nil {
		t.Fatal(err)
	}
	eng := &backend.FileRef{Role: "engine", Path: "ort_cpu_all/model.onnx", SHA256: f.engine.SHA256, Size: f.engine.Size}
	f.res = &tuner.Result{
		Format: tuner.ResultFormat,
		Results: []backend.CandidateResult{
			{Candidate: "ort:cpu:basic", Status: backend.StatusFailed, Artifacts: []backend.FileRef{{Role: "log", Path: "ort_cpu_basic/build.log", SHA256: f.log.SHA256, Size: f.log.Size}}},
			{Candidate: "ort:cpu:all", Status: backend.StatusPassed, Artifacts: []backend.FileRef{*eng, {Role: "log", Path: "ort_cpu_all/build.log", SHA256: f.log.SHA256, Size: f.log.Size}}},
		},
		Winner: &tuner.Winner{Selection: strategy.Selection{Index: 1, Candidate: "ort:cpu:all"}, Engine: eng},
	}
	f.st = &state.State{
		Format: state.StateFormat, Run: "r1", Status: "done",
		Graphs: []state.StateGraph{
			{Name: "0", Engine: &state.EngineRef{Key: f.engine.Key(), File: "model.onnx", SHA256: f.engine.SHA256, Size: f.engine.Size}},
			{Name: "1", Engine: &state.EngineRef{Key: f.engine.Key(), File: "model.onnx", SHA256: f.engine.SHA256, Size: f.engine.Size}},
			{Name: "2", Failure: &backend.FailureInfo{Class: backend.FailBuild}},
		},
		AITune: &state.Checkpoint{Prefix: prefix, Files: []state.CheckpointFile{{Path: "m/state_dict.pt", Size: int64(len(f.ckptBs))}}},
	}
	return f
}

func (f *blobsFixture) put(t *testing.T, key string, b []byte) {
	t.Helper()
	if err := f.store.Put(context.Background(), key, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
}

func flipBit(b []byte) []byte {
	out := bytes.Clone(b)
	out[len(out)/2] ^= 0x10
	return out
}

func TestVerifyResultBlobs(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, f *blobsFixture)
		want   []error  // nil: verifies
		names  []string // what the message must name
	}{
		{"intact", func(*testing.T, *blobsFixture) {}, nil, nil},
		{"engine bit-flipped", func(t *testing.T, f *blobsFixture) { f.put(t, f.engine.Key(), flipBit(f.engineBytes)) },
			[]error{ErrBadBlobs, artifacts.ErrCorrupt}, []string{"winner ort:cpu:all engine", "model.onnx"}},
		{"engine deleted", func(t *testing.T, f *blobsFixture) { f.store.Delete(context.Background(), f.engine.Key()) },
			[]error{ErrBadBlobs, artifacts.ErrNotExist}, []string{"engine"}},
		// Logs are not deployed, and not re-read on reuse.
		{"log truncated", func(t *testing.T, f *blobsFixture) { f.put(t, f.log.Key(), []byte("the")) }, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newBlobsFixture(t)
			tt.damage(t, f)
			err := VerifyResultBlobs(context.Background(), f.store, f.res)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("VerifyResultBlobs = %v, want nil", err)
				}
				return
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("VerifyResultBlobs = %v, want it to wrap %v", err, w)
				}
			}
			for _, n := range tt.names {
				if err != nil && !strings.Contains(err.Error(), n) {
					t.Errorf("error %q does not name %q", err, n)
				}
			}
		})
	}
}

// A store that cannot be read is not damage: the caller must not drop the
// index entry for it.
func TestVerifyResultBlobsStoreDown(t *testing.T) {
	f := newBlobsFixture(t)
	down := failingGets{Store: f.store, err: errors.New("connection refused")}
	err := VerifyResultBlobs(context.Background(), down, f.res)
	if err == nil || errors.Is(err, ErrBadBlobs) {
		t.Fatalf("VerifyResultBlobs on an unreachable store = %v, want a plain store error", err)
	}
}

type failingGets struct {
	artifacts.Store
	err error
}

func (s failingGets) Get(context.Context, string) (io.ReadCloser, error) { return nil, s.err }

func TestVerifyStateBlobs(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, f *blobsFixture)
		want   []error
		names  []string
	}{
		{"intact", func(*testing.T, *blobsFixture) {}, nil, nil},
		// Same size: VerifyStateBlobs does not re-hash (see its comment);
		// fetch would refuse this one, and the upload check repairs it.
		{"engine bit-flipped", func(t *testing.T, f *blobsFixture) { f.put(t, f.engine.Key(), flipBit(f.engineBytes)) }, nil, nil},
		{"engine deleted", func(t *testing.T, f *blobsFixture) { f.store.Delete(context.Background(), f.engine.Key()) },
			[]error{ErrBadBlobs, artifacts.ErrNotExist}, []string{"graph 0 engine", "blobs/sha256/"}},
		{"engine truncated", func(t *testing.T, f *blobsFixture) { f.put(t, f.engine.Key(), f.engineBytes[:3]) },
			[]error{ErrBadBlobs, artifacts.ErrCorrupt}, []string{"has 3 bytes"}},
		{"checkpoint file gone", func(t *testing.T, f *blobsFixture) {
			f.store.Delete(context.Background(), "runs/r1/aitune/m/state_dict.pt")
		}, []error{ErrBadBlobs, artifacts.ErrNotExist}, []string{"AITune checkpoint file m/state_dict.pt"}},
		{"malformed engine ref", func(t *testing.T, f *blobsFixture) { f.st.Graphs[1].Engine.SHA256 = "../../etc" },
			[]error{ErrBadBlobs}, []string{"graph 1 engine"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newBlobsFixture(t)
			tt.damage(t, f)
			err := VerifyStateBlobs(context.Background(), f.store, f.st)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("VerifyStateBlobs = %v, want nil", err)
				}
				return
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("VerifyStateBlobs = %v, want it to wrap %v", err, w)
				}
			}
			for _, n := range tt.names {
				if err != nil && !strings.Contains(err.Error(), n) {
					t.Errorf("error %q does not name %q", err, n)
				}
			}
		})
	}
}
