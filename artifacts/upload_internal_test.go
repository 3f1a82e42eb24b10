package artifacts

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The parallel path's check: what each part sent must be what the
// sequential pass hashed, and that must be ref.
func TestVerifyingReaderParts(t *testing.T) {
	t.Parallel()
	const partSize, size = 1 << 10, 3<<10 + 100
	data := make([]byte, size)
	rand.Read(data)
	sum := sha256.Sum256(data)
	ref := Ref{SHA256: hex.EncodeToString(sum[:]), Size: size}
	type send struct{ off, n int64 }
	inOrder := []send{{0, 512}, {512, 512}, {1024, 1024}, {2048, 1024}, {3072, 100}}
	tests := []struct {
		name string
		// before runs after the sequential pass ended and before the sends.
		before func(f *os.File)
		sends  []send
		want   string // "" for success, else part of the error
	}{
		{"in order", nil, inOrder, ""},
		{"parts out of order", nil, []send{{3072, 100}, {2048, 1024}, {0, 1024}, {1024, 1024}}, ""},
		{"a part retried from its start", nil, []send{{0, 512}, {0, 1024}, {1024, 1024}, {2048, 1024}, {3072, 100}}, ""},
		{"a part cut short", nil, []send{{0, 1024}, {1024, 1000}, {2048, 1024}, {3072, 100}}, "part 2"},
		{"a part read out of order", nil, []send{{0, 1024}, {1536, 512}, {1024, 512}, {2048, 1024}, {3072, 100}}, "part 2"},
		{"changed after hashing, before sending", func(f *os.File) { f.WriteAt([]byte{data[2100] ^ 1}, 2100) }, inOrder, "part 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			vr := newVerifyingReader(t.Context(), f, size, partSize)
			defer vr.stop()
			vr.once.Do(vr.startPass)
			res := <-vr.pass // wait for the pass, and put its result back
			vr.pass <- res
			if tt.before != nil {
				tt.before(f)
			}
			for _, s := range tt.sends {
				if _, err := vr.ReadAt(make([]byte, s.n), s.off); err != nil {
					t.Fatalf("ReadAt(%d, %d): %v", s.n, s.off, err)
				}
			}
			err = vr.check(ref)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("check = %v, want success", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("check = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}

// A file that changed before the pass hashed it does not match ref.
func TestVerifyingReaderChangedBeforeHashing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("hello, world"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("hello, there"))
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vr := newVerifyingReader(t.Context(), f, 12, 16)
	defer vr.stop()
	if _, err := vr.ReadAt(make([]byte, 12), 0); err != nil {
		t.Fatal(err)
	}
	if err := vr.check(Ref{SHA256: hex.EncodeToString(sum[:]), Size: 12}); err == nil || !strings.Contains(err.Error(), "changed while uploading") {
		t.Fatalf("check = %v, want a digest mismatch", err)
	}
}

func TestUploadPartSize(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ size, want int64 }{
		{0, 16 << 20}, {1 << 30, 16 << 20}, {160000 << 20, 16 << 20}, {200 << 30, 21 << 20},
	} {
		got := uploadPartSize(tt.size)
		if got != tt.want || (tt.size+got-1)/got > 10000 {
			t.Errorf("uploadPartSize(%d) = %d, want %d (≤ 10,000 parts)", tt.size, got, tt.want)
		}
	}
}
