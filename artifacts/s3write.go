package artifacts

import (
	"bytes"
	"context"
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
	_, err := s.client.PutObject(ctx, s.bucket, s.prefix+key, noClose(r), size, opts)
	switch {
	case err == nil:
		return true, nil
	case isCode(err, "PreconditionFailed"):
		return false, nil
	}
	return false, s.opError(ctx, "create", key, err)
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
