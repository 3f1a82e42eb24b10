package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"sync/atomic"

	"github.com/tunefleet/tunefleet/internal/fsutil"
)

const (
	// copyBuf is hashedCopy's buffer. Each read takes what the socket
	// holds (up to this), and is hashed and written while it is still in
	// the processor's cache: filling a 1 MiB buffer first (io.ReadFull)
	// made the hash and the write read it back from memory, and cost a
	// third more processor time; io.Copy's 32 KiB makes more calls.
	copyBuf = 256 << 10
	// writebackPiece is how much of a file hashedCopy writes before it
	// asks the kernel to start writing that much to disk.
	writebackPiece = 16 << 20
)

// hashedCopy copies at most limit bytes of r into f and returns their
// sha256 and count, reporting what it writes to the context's Progress.
// One goroutine reads, hashes and writes each buffer: the bytes are read
// from the stream once and never read back from the file.
//
// With writeback (for a file that will be fsynced before it is used:
// Fetch), a second goroutine asks the kernel to start writing each
// writebackPiece to disk once it is written (fsutil.StartWriteback), so
// that the disk write overlaps the download and the final fsync waits for
// the last piece only. That call blocks while the disk's queue is full,
// so it runs beside the copy, never in its way.
//
// Measured on a busy 2-core machine and lost (docs/performance.md):
// parallel ranged GETs hashed behind them (the hash read every byte back
// from the page cache); a goroutine hashing behind the writer, or one
// writing behind the hasher (the hand-offs cost more than they overlapped);
// O_DIRECT writes (one write in flight is slower than the kernel's own
// writeback).
func hashedCopy(ctx context.Context, r io.Reader, f *os.File, limit int64, writeback bool) (string, int64, error) {
	var wb *writebacker
	if writeback {
		wb = startWriteback(f)
	}
	h := sha256.New()
	p := progressFrom(ctx)
	lr := io.LimitReader(ctxReader{ctx: ctx, r: r}, limit)
	buf := make([]byte, copyBuf)
	var n int64
	var err error
	for err == nil {
		var m int
		m, err = lr.Read(buf)
		if m > 0 {
			h.Write(buf[:m])
			if _, werr := f.Write(buf[:m]); werr != nil {
				err = werr
				break
			}
			n += int64(m)
			p.Moved(int64(m))
			if wb != nil {
				wb.written(n)
			}
		}
	}
	if wb != nil {
		wb.stop(n)
	}
	if !errors.Is(err, io.EOF) {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// writebacker starts the writeback of a growing file's pieces from a
// goroutine of its own.
type writebacker struct {
	asked int64        // where the last piece handed over ended (writer's)
	upTo  atomic.Int64 // how far the goroutine is to start writeback
	kick  chan struct{}
	done  chan struct{}
}

func startWriteback(f *os.File) *writebacker {
	w := &writebacker{kick: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		var from int64
		for range w.kick {
			// Pieces that came while the last call blocked are merged
			// into one call.
			to := w.upTo.Load()
			fsutil.StartWriteback(f, from, to-from)
			from = to
		}
		fsutil.StartWriteback(f, from, w.upTo.Load()-from) // the last, partial piece
	}()
	return w
}

// written says that the first n bytes of the file are written; a full
// piece is handed to the goroutine without waiting for it.
func (w *writebacker) written(n int64) {
	if n-w.asked < writebackPiece {
		return
	}
	w.asked = n
	w.upTo.Store(n)
	select {
	case w.kick <- struct{}{}:
	default: // one is pending: it will read upTo
	}
}

// stop ends the goroutine once it has asked for the rest of the file's n
// bytes.
func (w *writebacker) stop(n int64) {
	w.upTo.Store(n)
	close(w.kick)
	<-w.done
}
