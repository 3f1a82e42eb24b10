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
// a failed write or a cancelled context as an error (never hanging on the
// hasher); with writeback on, across several pieces and a partial last one
// too.
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
		file    func(t *testing.T, path string) *os.File // nil: a new file
		want    []byte                                   // what the file holds
		wantErr error                                    // nil for success
	}{
		{"empty", t.Context(), func() io.Reader { return bytes.NewReader(nil) }, 1, nil, nil, nil},
		{"less than a buffer", t.Context(), func() io.Reader { return bytes.NewReader(data[:1000]) }, 1001, nil, data[:1000], nil},
		{"odd reads across pieces", t.Context(), func() io.Reader { return oddReader{bytes.NewReader(data)} }, size + 1, nil, data, nil},
		{"one byte past the limit", t.Context(), func() io.Reader { return bytes.NewReader(data) }, writebackPiece + 1, nil, data[:writebackPiece+1], nil},
		{"a read fails half way", t.Context(), func() io.Reader { return io.MultiReader(bytes.NewReader(data[:size/2]), iotest.ErrReader(boom)) }, size + 1, nil, nil, boom},
		{"a write fails", t.Context(), func() io.Reader { return bytes.NewReader(data) }, size + 1, closedFile, nil, os.ErrClosed},
		{"cancelled", cancelled, func() io.Reader { return bytes.NewReader(data) }, size + 1, nil, nil, context.Canceled},
	}
	for _, tt := range tests {
		for _, writeback := range []bool{false, true} {
			name := tt.name
			if writeback {
				name += "/writeback"
			}
			t.Run(name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "blob")
				open := tt.file
				if open == nil {
					open = newFile
				}
				f := open(t, path)
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

func newFile(t *testing.T, path string) *os.File {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// closedFile returns a file that is already closed: every write fails.
func closedFile(t *testing.T, path string) *os.File {
	f := newFile(t, path)
	f.Close()
	return f
}

// oddReader returns reads of sizes that fit no buffer or piece boundary.
type oddReader struct{ r io.Reader }

func (o oddReader) Read(p []byte) (int, error) {
	return o.r.Read(p[:min(len(p), 77777)])
}
