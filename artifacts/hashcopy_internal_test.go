package artifacts

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
)

// hashedCopy writes and hashes exactly what it read, whatever sizes the
// reads come in, stops one byte past its limit, and returns a failed read
// or a cancelled context as an error; with writeback on, across several
// pieces and a partial last one too.
func TestHashedCopy(t *testing.T) {
	t.Parallel()
	const size = 2*writebackPiece + 12345
	data := make([]byte, size)
	rand.Read(data)
	boom := errors.New("connection reset")
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		r       func() io.Reader
		limit   int64
		want    []byte // what the file holds
		wantErr error  // nil for success
	}{
		{"empty", t.Context(), func() io.Reader { return bytes.NewReader(nil) }, 1, nil, nil},
		{"less than a buffer", t.Context(), func() io.Reader { return bytes.NewReader(data[:1000]) }, 1001, data[:1000], nil},
		{"odd reads across pieces", t.Context(), func() io.Reader { return oddReader{bytes.NewReader(data)} }, size + 1, data, nil},
		{"one byte past the limit", t.Context(), func() io.Reader { return bytes.NewReader(data) }, writebackPiece + 1, data[:writebackPiece+1], nil},
		{"a read fails half way", t.Context(), func() io.Reader { return io.MultiReader(bytes.NewReader(data[:size/2]), iotest.ErrReader(boom)) }, size + 1, nil, boom},
		{"cancelled", cancelled, func() io.Reader { return bytes.NewReader(data) }, size + 1, nil, context.Canceled},
	}
	for _, tt := range tests {
		for _, writeback := range []bool{false, true} {
			name := tt.name
			if writeback {
				name += "/writeback"
			}
			t.Run(name, func(t *testing.T) {
				f, err := os.Create(filepath.Join(t.TempDir(), "blob"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				sum, n, err := hashedCopy(tt.ctx, tt.r(), f, tt.limit, writeback)
				if tt.wantErr != nil {
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("hashedCopy = %v, want %v", err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatalf("hashedCopy: %v", err)
				}
				want := sha256.Sum256(tt.want)
				if sum != hex.EncodeToString(want[:]) || n != int64(len(tt.want)) {
					t.Errorf("hashedCopy = sha256 %s, %d bytes; want %x, %d bytes", sum, n, want, len(tt.want))
				}
				if got, err := os.ReadFile(f.Name()); err != nil || !bytes.Equal(got, tt.want) {
					t.Errorf("the file holds %d bytes (%v), not the %d read", len(got), err, len(tt.want))
				}
			})
		}
	}
}

// oddReader returns reads of sizes that fit no buffer or piece boundary.
type oddReader struct{ r io.Reader }

func (o oddReader) Read(p []byte) (int, error) {
	return o.r.Read(p[:min(len(p), 77777)])
}
