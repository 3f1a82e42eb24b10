package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"sync"
)

// putOpen uploads the open file f as the blob ref unless the store holds it
// already, and makes sure the stored bytes are the ones ref names.
//
// The file goes to the store as an io.ReaderAt as well as a reader, so
// minio-go sends a large one as parallel multipart parts (it sends a plain
// reader's parts one after the other, buffering each). A parallel upload
// reads the file out of order, so it cannot be hashed on the way; instead,
// the bytes each part sent are checksummed (CRC-32C, cheap), and one
// sequential pass, started with the upload and running beside it, hashes
// the file and checksums the same parts. The blob is kept only if that
// pass gives ref's sha256 and every part's checksum matches what was sent:
// the bytes uploaded are then the bytes hashed. A small file (one PUT) and
// the local store read sequentially and are hashed on the way, as before.
//
// CRC-32C guards against a file that changes while it is uploaded (an
// accident), not against an adversary: whoever can write the file can
// make it anything anyway.
func putOpen(ctx context.Context, s Store, path string, f *os.File, ref Ref) (Ref, error) {
	// Every blob is looked for first, small ones too: a forced re-run
	// submits a bundle whose files the store holds already, and writing
	// them blind cost a file store a temporary file, an fsync and a rename
	// per file (a 200-graph bundle: 1,200 fsyncs) and S3 a PUT the server
	// writes, where the look is a read (a GET that misses costs a new
	// blob one round trip more, in parallel with the others: PutFiles).
	if have, err := present(ctx, s, ref); err != nil || have {
		reportSkipped(ctx, ref.Size)
		return ref, err
	}
	// PutFile has read the file to its end to hash it.
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Ref{}, fmt.Errorf("put blob: %s: %w", path, err)
	}
	vr := newVerifyingReader(ctx, f, ref.Size, uploadPartSize(ref.Size))
	defer vr.stop()
	if err := s.Put(ctx, ref.Key(), vr, ref.Size); err != nil {
		return Ref{}, fmt.Errorf("put blob %s (%s): %w", ref.Key(), path, err)
	}
	if err := vr.check(ref); err != nil {
		// A blob under a wrong name is worse than none: remove it, unless
		// another writer has put the right bytes there since (best effort).
		dctx := context.WithoutCancel(ctx)
		if !storedMatches(dctx, s, ref) {
			s.Delete(dctx, ref.Key())
		}
		return Ref{}, fmt.Errorf("put blob: %s: %w: upload removed", path, err)
	}
	return ref, nil
}

// verifyingReader is what putOpen hands the store. Read (with Seek to
// rewind, for minio-go's retries) hashes in order; ReadAt checksums each
// part as it is sent and starts the sequential hashing pass.
type verifyingReader struct {
	ctx      context.Context
	f        *os.File
	size     int64
	partSize int64
	progress Progress

	// Sequential path.
	seqH    hash.Hash
	seqN    int64
	seqHigh int64 // the most bytes any attempt read: progress counts each byte once
	seqUse  bool

	// Parallel path.
	mu    sync.Mutex
	parts []partSum // by part index
	once  sync.Once
	pass  chan passResult // the sequential pass's result, once started
	stopC chan struct{}
}

// partSum is what one part sent: the CRC-32C of bytes [start, next).
type partSum struct {
	next   int64
	high   int64 // the furthest any attempt read: progress counts each byte once
	crc    uint32
	broken bool // read out of order: cannot be compared
}

type passResult struct {
	sum  string
	n    int64
	crcs []uint32
	err  error
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func newVerifyingReader(ctx context.Context, f *os.File, size, partSize int64) *verifyingReader {
	nparts := 1
	if size > 0 {
		nparts = int((size + partSize - 1) / partSize)
	}
	parts := make([]partSum, nparts)
	for i := range parts {
		parts[i].next = int64(i) * partSize
		parts[i].high = parts[i].next
	}
	return &verifyingReader{
		ctx: ctx, f: f, size: size, partSize: partSize, progress: progressFrom(ctx),
		seqH: sha256.New(), parts: parts, stopC: make(chan struct{}),
	}
}

func (r *verifyingReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := r.f.Read(p)
	r.seqUse = true
	r.seqH.Write(p[:n])
	r.seqN += int64(n)
	if r.seqN > r.seqHigh {
		r.progress.Moved(r.seqN - r.seqHigh)
		r.seqHigh = r.seqN
	}
	return n, err
}

// Seek supports only rewinding and asking the position: any other move
// would make the hash cover something other than the file in order.
func (r *verifyingReader) Seek(offset int64, whence int) (int64, error) {
	switch {
	case offset == 0 && whence == io.SeekStart:
		if _, err := r.f.Seek(0, io.SeekStart); err != nil {
			return 0, err
		}
		r.seqH.Reset()
		r.seqN = 0
		return 0, nil
	case offset == 0 && whence == io.SeekCurrent:
		return r.seqN, nil
	}
	return 0, fmt.Errorf("verifying reader: only rewinding is supported")
}

// ReadAt reads for one part of a multipart upload. A read at the part's
// start is a new attempt (minio-go retries a part from its start), so the
// part's checksum starts over.
func (r *verifyingReader) ReadAt(p []byte, off int64) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	r.once.Do(r.startPass)
	n, err := r.f.ReadAt(p, off)
	if n > 0 {
		r.sent(off, p[:n])
	}
	return n, err
}

func (r *verifyingReader) sent(off int64, b []byte) {
	i := int(off / r.partSize)
	if i >= len(r.parts) || off+int64(len(b)) > min(int64(i+1)*r.partSize, r.size) {
		r.mu.Lock()
		if i < len(r.parts) {
			r.parts[i].broken = true
		}
		r.mu.Unlock()
		return
	}
	start := int64(i) * r.partSize
	var moved int64
	r.mu.Lock()
	ps := &r.parts[i]
	switch off {
	case start:
		ps.next, ps.crc, ps.broken = start, 0, false
		fallthrough
	case ps.next:
		ps.crc = crc32.Update(ps.crc, castagnoli, b)
		ps.next += int64(len(b))
		if ps.next > ps.high {
			moved, ps.high = ps.next-ps.high, ps.next
		}
	default:
		ps.broken = true
	}
	r.mu.Unlock()
	if moved > 0 {
		r.progress.Moved(moved)
	}
}

// startPass hashes the file in order, and checksums it part by part,
// beside the upload.
func (r *verifyingReader) startPass() {
	r.pass = make(chan passResult, 1)
	go func() {
		res := passResult{crcs: make([]uint32, len(r.parts))}
		h := sha256.New()
		buf := make([]byte, 1<<20)
		for off := int64(0); off < r.size; {
			select {
			case <-r.stopC:
				res.err = context.Canceled
				r.pass <- res
				return
			default:
			}
			i := int(off / r.partSize)
			end := min(int64(i+1)*r.partSize, r.size, off+int64(len(buf)))
			n, err := r.f.ReadAt(buf[:end-off], off)
			h.Write(buf[:n])
			res.crcs[i] = crc32.Update(res.crcs[i], castagnoli, buf[:n])
			off += int64(n)
			res.n = off
			if err == io.EOF {
				break
			}
			if err != nil {
				res.err = err
				break
			}
		}
		res.sum = hex.EncodeToString(h.Sum(nil))
		r.pass <- res
	}()
}

// stop ends the sequential pass when the upload failed.
func (r *verifyingReader) stop() {
	close(r.stopC)
}

// check says whether what was sent is ref's bytes.
func (r *verifyingReader) check(ref Ref) error {
	if r.seqUse {
		if got := hex.EncodeToString(r.seqH.Sum(nil)); got != ref.SHA256 || r.seqN != ref.Size {
			return fmt.Errorf("does not match its digest (sha256 %s expected, %s uploaded; changed while uploading?)", ref.SHA256, got)
		}
	}
	if r.pass == nil {
		if !r.seqUse && ref.Size > 0 {
			return fmt.Errorf("the store read none of its %d bytes", ref.Size)
		}
		return nil
	}
	res := <-r.pass
	if res.err != nil {
		return fmt.Errorf("hashing it beside the upload: %w", res.err)
	}
	if res.sum != ref.SHA256 || res.n != ref.Size {
		return fmt.Errorf("does not match its digest (sha256 %s expected, %s now; changed while uploading?)", ref.SHA256, res.sum)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, ps := range r.parts {
		end := min(int64(i+1)*r.partSize, r.size)
		if ps.broken || ps.next != end || ps.crc != res.crcs[i] {
			return fmt.Errorf("part %d (bytes %d–%d) sent other bytes than were hashed (changed while uploading?)", i+1, int64(i)*r.partSize, end)
		}
	}
	return nil
}
