package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"

	"github.com/minio/minio-go/v7"
)

// Create is Put where key holds no object (If-None-Match: *, S3's
// conditional write: AWS S3, MinIO, Ceph and versitygw honour it); created
// false: one was there, and it is left as it was. Objects this large go in
// one request: conditional multipart uploads are not everywhere.
func (s *S3) Create(ctx context.Context, key string, r io.Reader, size int64) (bool, error) {
	if err := CheckKey(key); err != nil {
		return false, err
	}
	if size < 0 || size > maxCreateSize {
		return false, fmt.Errorf("create %q in %s: size %d: conditional writes take 0 to %d bytes", key, s, size, int64(maxCreateSize))
	}
	opts := minio.PutObjectOptions{ContentType: contentType(key), DisableMultipart: true}
	opts.SetMatchETagExcept("*")
	var err error
	if size <= maxSignedPut {
		err = s.putSigned(ctx, key, r, size, opts)
	} else {
		_, err = s.client.PutObject(ctx, s.bucket, s.prefix+key, noClose(r), size, opts)
	}
	switch {
	case err == nil:
		return true, nil
	case isCode(err, "PreconditionFailed"):
		return false, nil
	}
	return false, s.opError(ctx, "create", key, err)
}

// maxSignedPut is the largest object Put sends in one request signed
// with its payload's SHA-256. Over plain HTTP minio-go otherwise signs
// the body as a stream of chunks (aws-chunked, a signature per chunk that
// the server checks too): for the documents and small blobs that are most
// of tunefleet's writes, hashing the bytes once is the cheaper request.
const maxSignedPut = 1 << 20

// putSigned reads the object (size bytes, no more, no fewer) and sends it
// in one PUT signed with its SHA-256.
func (s *S3) putSigned(ctx context.Context, key string, r io.Reader, size int64, opts minio.PutObjectOptions) error {
	buf := make([]byte, size+1)
	n, err := io.ReadFull(r, buf)
	switch {
	case int64(n) > size:
		return fmt.Errorf("reader has more than the %d bytes it announced", size)
	case int64(n) < size:
		if err == nil || err == io.EOF || err == io.ErrUnexpectedEOF {
			return fmt.Errorf("reader ended after %d of %d bytes", n, size)
		}
		return err
	}
	buf = buf[:size]
	sum := sha256.Sum256(buf)
	// Not the streaming signature: the payload's hash signs the request.
	opts.DisableContentSha256 = true
	_, err = minio.Core{Client: s.client}.PutObject(ctx, s.bucket, s.prefix+key, bytes.NewReader(buf), size, "", hex.EncodeToString(sum[:]), opts)
	return err
}

// maxCreateSize bounds what Create writes: documents, not engines.
const maxCreateSize = 64 << 20

var _ Creator = (*S3)(nil)

// lengthed sends a request body that net/http would send chunked because
// its length is unknown (minio-go leaves ContentLength 0 for an empty
// object, its aws-chunked framing included) with a Content-Length when
// it is small. Some S3 servers do not read a chunked body they expect to
// be empty (versitygw v1.8.0 on fasthttp): the bytes left on a kept-alive
// connection are then parsed as the next request, which fails.
type lengthed struct{ rt http.RoundTripper }

// maxBuffered bounds the body lengthed reads to learn its length.
const maxBuffered = 1 << 20

func (l lengthed) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.ContentLength != 0 || req.Body == nil || req.Body == http.NoBody {
		return l.rt.RoundTrip(req)
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, maxBuffered+1))
	if err != nil {
		req.Body.Close()
		return nil, err
	}
	body := req.Body
	req = req.Clone(req.Context())
	switch {
	case len(b) > maxBuffered: // large: chunked, as it was
		req.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), body), body}
	case len(b) == 0:
		body.Close()
		req.Body = http.NoBody
	default:
		body.Close()
		req.ContentLength = int64(len(b))
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	return l.rt.RoundTrip(req)
}
