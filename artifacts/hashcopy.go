package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/tunefleet/tunefleet/internal/fsutil"
)

const (
	// copyBuf is the size of hashedCopy's buffers. Each read takes what
	// the socket holds (up to this), small enough that the writer and
	// then the hasher find it in the processors' caches: filling a 1 MiB
	// buffer first (io.ReadFull) made the hash and the write read it back
	// from memory, and cost a third more processor time; io.Copy's 32 KiB
	// makes more calls.
	copyBuf = 256 << 10
	// writebackPiece is how much of a file hashedCopy writes before it
	// asks the kernel to start writing that much to disk.
	writebackPiece = 16 << 20
)

// hashBuffers is how many copyBuf buffers a copy has in flight between its
// reader and its hasher: enough that neither waits for the other while
// both keep pace, few enough to stay in the processors' caches.
const hashBuffers = 4

// copyBufs keeps hashedCopy's buffers from one copy to the next: a worker
// downloads a task's small files one after another, and hashBuffers fresh
// buffers for each would be a megabyte of zeroed memory per file.
var copyBufs = sync.Pool{New: func() any { return new([copyBuf]byte) }}

// hashedCopy copies at most limit bytes of r into f and returns their
// sha256 and count, reporting what it writes to the context's Progress.
// The caller's goroutine reads each buffer and writes it to the file; a
// second goroutine hashes the buffers behind it, in order, and hands them
// back. The bytes are read from the stream once and never read back from
// the file, and the hash (1.57 GB/s a core here, as fast as loopback
// delivers) runs on another core instead of in the download's way.
//
// With writeback (for a file that will be fsynced before it is used:
// Fetch), a third goroutine asks the kernel to start writing each
// writebackPiece to disk once it is written (fsutil.StartWriteback), so
// that the disk write overlaps the download and the final fsync waits for
// the last piece only. That call blocks while the disk's queue is full,
// so it runs beside the copy, never in its way.
//
// Measured side by side (docs/performance.md, 1 GiB from versitygw on
// loopback, seven rotated rounds on the quiet 2-core machine): hashing
// behind the writer took the hashed download from 0.62 to 0.80 of raw
// minio-go, and a fetch with its fsync from 0.50 to 0.58. Measured and
// lost: parallel ranged GETs hashed behind them (the hash read every byte
// back from the page cache); O_DIRECT writes (one write in flight is
// slower than the kernel's own writeback).
func hashedCopy(ctx context.Context, r io.Reader, f *os.File, limit int64, writeback bool) (string, int64, error) {
	var wb *writebacker
	if writeback {
		wb = startWriteback(f)
	}
	free := make(chan []byte, hashBuffers)
	for range hashBuffers {
		free <- copyBufs.Get().(*[copyBuf]byte)[:]
	}
	full := make(chan []byte, hashBuffers)
	sum := make(chan []byte, 1)
	go func() {
		h := sha256.New()
		for b := range full {
			h.Write(b)
			free <- b[:cap(b)]
		}
		sum <- h.Sum(nil)
	}()
	p := progressFrom(ctx)
	lr := io.LimitReader(ctxReader{ctx: ctx, r: r}, limit)
	var n int64
	var err error
	for err == nil {
		buf := <-free
		var m int
		m, err = lr.Read(buf)
		if m == 0 {
			free <- buf
			continue
		}
		if _, werr := f.Write(buf[:m]); werr != nil {
			free <- buf
			err = werr
			break
		}
		full <- buf[:m]
		n += int64(m)
		p.Moved(int64(m))
		if wb != nil {
			wb.written(n)
		}
	}
	close(full)
	digest := <-sum
	// Every buffer is back: the hasher has returned all it was handed.
	for range hashBuffers {
		copyBufs.Put((*[copyBuf]byte)(<-free))
	}
	if wb != nil {
		wb.stop(n)
	}
	if !errors.Is(err, io.EOF) {
		return "", n, err
	}
	return hex.EncodeToString(digest), n, nil
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
