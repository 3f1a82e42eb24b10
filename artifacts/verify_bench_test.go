package artifacts_test

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
)

// BenchmarkVerifyCost puts a 64 MiB blob once, then measures, side by
// side, what a repeated put costs now that an existing blob is re-hashed
// (PutFileAs over a good blob: one streaming read of it), against a Stat
// (what the size-only check cost) and a fresh upload.
//
//	go test -run '^$' -bench VerifyCost -benchtime 5x ./artifacts/
func BenchmarkVerifyCost(b *testing.B) {
	const size = 64 << 20
	path := filepath.Join(b.TempDir(), "engine")
	data := make([]byte, size)
	rand.Read(data)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	stores := map[string]func(b *testing.B) artifacts.Store{
		"local": func(b *testing.B) artifacts.Store {
			l, err := artifacts.NewLocal(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			return l
		},
		"s3": func(b *testing.B) artifacts.Store {
			srv := testsvc.StartS3(b)
			s, err := artifacts.NewS3(srv.Bucket(b))
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
	}
	for name, mk := range stores {
		b.Run(name, func(b *testing.B) {
			s := mk(b)
			ref, err := artifacts.PutFile(b.Context(), s, path)
			if err != nil {
				b.Fatal(err)
			}
			b.Run("stat-only", func(b *testing.B) {
				b.SetBytes(size)
				for b.Loop() {
					if _, err := s.Stat(b.Context(), ref.Key()); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("put-existing-rehash", func(b *testing.B) {
				b.SetBytes(size)
				for b.Loop() {
					if _, err := artifacts.PutFileAs(b.Context(), s, path, ref); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("fresh-upload", func(b *testing.B) {
				b.SetBytes(size)
				for b.Loop() {
					if err := s.Delete(b.Context(), ref.Key()); err != nil {
						b.Fatal(err)
					}
					if _, err := artifacts.PutFileAs(b.Context(), s, path, ref); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
