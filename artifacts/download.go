package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/tunefleet/tunefleet/internal/fsutil"
)

// RangeGetter is a Store that can read part of an object; FetchFile
// downloads a large blob from one in parallel ranges.
type RangeGetter interface {
	// GetRange opens n bytes of the object at key from offset off (fewer
	// when the object ends first). A missing key wraps ErrNotExist.
	GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)
}

// errShort marks a blob that ended before its ref's size.
var errShort = errors.New("the object is shorter than its ref says")

const (
	// rangedMin is the smallest blob FetchFile downloads in ranges: below
	// it, a single GET finishes before parallel ones would pay off.
	rangedMin = 64 << 20
	// rangeSize is one ranged GET: large enough that request overhead is
	// lost in the transfer, small enough that 4 keep every worker busy to
	// the end.
	rangeSize = 16 << 20
	// rangeWorkers is how many ranges are in flight at once.
	rangeWorkers = 4
	// copyBuf is the buffer of a streaming copy: io.Copy's 32 KiB makes a
	// system call (and a hash call) per 32 KiB.
	copyBuf = 1 << 20
)

// download writes the blob ref names into tmp and returns the sha256 and
// the size of what it wrote: at most one byte past ref.Size, enough to tell
// an oversized object without downloading all of it. A large blob from a
// RangeGetter comes in parallel ranges, hashed in order behind them. With
// writeback (the file will be fsynced before it is renamed into place:
// Fetch), writing the file to disk starts as the download goes, piece by
// piece, so that the fsync waits for the last piece only.
func downloadBlob(ctx context.Context, s Store, ref Ref, tmp *os.File, writeback bool) (string, int64, error) {
	if rg, ok := s.(RangeGetter); ok && ref.Size >= rangedMin {
		return downloadRanges(ctx, rg, ref, tmp, writeback)
	}
	rc, err := s.Get(ctx, ref.Key())
	if err != nil {
		return "", 0, err
	}
	defer rc.Close()
	h := sha256.New()
	var dst io.Writer = tmp
	if writeback {
		dst = &writebackWriter{f: tmp}
	}
	w := progressWriter{w: io.MultiWriter(dst, h), p: progressFrom(ctx)}
	n, err := io.CopyBuffer(w, io.LimitReader(ctxReader{ctx: ctx, r: rc}, ref.Size+1), make([]byte, copyBuf))
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// downloadRanges fetches ref in rangeSize pieces, rangeWorkers at a time,
// each written at its offset in tmp (sized first). This goroutine hashes
// the file in order as the pieces land, reading back what the workers
// wrote (from the page cache), so hashing overlaps the transfer. The last
// range asks for one byte more than ref.Size, so an oversized object is
// told apart.
func downloadRanges(ctx context.Context, s RangeGetter, ref Ref, tmp *os.File, writeback bool) (string, int64, error) {
	if err := tmp.Truncate(ref.Size); err != nil {
		return "", 0, err
	}
	nr := int((ref.Size + rangeSize - 1) / rangeSize)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	done := make([]bool, nr)
	var extra int64 // bytes past ref.Size (0 or 1)
	var failed error
	fail := func(err error) {
		mu.Lock()
		if failed == nil {
			failed = err
			cancel(err)
		}
		cond.Broadcast()
		mu.Unlock()
	}

	next := make(chan int)
	var wg sync.WaitGroup
	for range rangeWorkers {
		wg.Go(func() {
			buf := make([]byte, copyBuf)
			for i := range next {
				off := int64(i) * rangeSize
				n := min(rangeSize, ref.Size-off)
				want := n
				if i == nr-1 {
					want++ // one byte past the end: is the object longer?
				}
				got, err := fetchRange(ctx, s, ref.Key(), off, want, tmp, buf)
				switch {
				case err != nil:
					fail(err)
					return
				case got < n:
					fail(fmt.Errorf("range at %d ended after %d of %d bytes: %w", off, got, n, errShort))
					return
				}
				mu.Lock()
				done[i] = true
				extra += got - n
				cond.Broadcast()
				mu.Unlock()
			}
		})
	}
	go func() {
		defer close(next)
		for i := range nr {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	// A cancelled caller wakes the hasher too.
	stop := context.AfterFunc(ctx, func() { fail(context.Cause(ctx)) })
	defer stop()

	h := sha256.New()
	buf := make([]byte, copyBuf)
	var hashed int64
	var err error
	for i := 0; i < nr && err == nil; i++ {
		mu.Lock()
		for !done[i] && failed == nil {
			cond.Wait()
		}
		err = failed
		mu.Unlock()
		if err != nil {
			break
		}
		end := min(int64(i+1)*rangeSize, ref.Size)
		if writeback {
			fsutil.StartWriteback(tmp, int64(i)*rangeSize, end-int64(i)*rangeSize)
		}
		for hashed < end && err == nil {
			m, rerr := tmp.ReadAt(buf[:min(int64(len(buf)), end-hashed)], hashed)
			h.Write(buf[:m])
			hashed += int64(m)
			if rerr != nil && !(errors.Is(rerr, io.EOF) && hashed == end) {
				err = rerr
			}
		}
	}
	if err != nil {
		fail(err)
	}
	wg.Wait()
	if failed != nil {
		return "", hashed, failed
	}
	return hex.EncodeToString(h.Sum(nil)), hashed + extra, nil
}

// fetchRange copies up to n bytes from off of the object into f at off.
func fetchRange(ctx context.Context, s RangeGetter, key string, off, n int64, f *os.File, buf []byte) (int64, error) {
	rc, err := s.GetRange(ctx, key, off, n)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	w := progressWriter{w: io.NewOffsetWriter(f, off), p: progressFrom(ctx)}
	got, err := io.CopyBuffer(w, io.LimitReader(ctxReader{ctx: ctx, r: rc}, n), buf)
	if err != nil {
		return got, fmt.Errorf("range at %d: %w", off, err)
	}
	return got, nil
}

// writebackWriter writes a file in order and starts writing each
// rangeSize piece to disk once it is complete (fsutil.StartWriteback).
type writebackWriter struct {
	f        *os.File
	off, cut int64 // bytes written; where the next piece's writeback starts
}

func (w *writebackWriter) Write(b []byte) (int, error) {
	n, err := w.f.Write(b)
	w.off += int64(n)
	if w.off-w.cut >= rangeSize {
		fsutil.StartWriteback(w.f, w.cut, w.off-w.cut)
		w.cut = w.off
	}
	return n, err
}

// progressWriter reports what it writes to a Progress.
type progressWriter struct {
	w io.Writer
	p Progress
}

func (pw progressWriter) Write(b []byte) (int, error) {
	n, err := pw.w.Write(b)
	if n > 0 {
		pw.p.Moved(int64(n))
	}
	return n, err
}
