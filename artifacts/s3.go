package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// DefaultRegion is the region used when none is configured; S3-compatible
// servers (versitygw, MinIO) accept it.
const DefaultRegion = "us-east-1"

// checkTimeout bounds Check. minio-go retries a failed request up to 10
// times with back-off, which would make an unreachable endpoint hang for
// many seconds before saying anything.
const checkTimeout = 5 * time.Second

// unknownSizePartSize is the multipart part size for uploads of unknown
// size. minio-go's default for size -1 is ~537 MiB per part, held in memory;
// 16 MiB parts bound memory and still allow objects up to 156 GiB.
const unknownSizePartSize = 16 << 20

// minUploadPartSize is S3's smallest part size we use (minio-go's too);
// uploadPartSize grows it for objects that would need more than S3's
// 10,000 parts.
const minUploadPartSize = 16 << 20

// uploadThreads is how many parts of one multipart upload are in flight:
// enough to keep a loopback or LAN server busy while a core hashes.
const uploadThreads = 4

// uploadPartSize is the part size of a multipart upload of size bytes: a
// multiple of 1 MiB, at least 16 MiB, and at most 10,000 parts. putOpen
// uses it too, to checksum exactly the parts that are sent.
func uploadPartSize(size int64) int64 {
	ps := int64(minUploadPartSize)
	if need := (size + 9999) / 10000; need > ps {
		ps = (need + 1<<20 - 1) &^ (1<<20 - 1)
	}
	return ps
}

// S3Config says where an S3 store is and how to sign requests. Credentials
// come from the environment or a credentials file (see Open), never from
// flags or URLs; String and GoString redact the secret.
type S3Config struct {
	// Endpoint is the server's URL: http://host:port or https://host[:port].
	Endpoint string
	// Bucket must exist (Check says so when it does not).
	Bucket string
	// Prefix is prepended to every key ("team/a" → "team/a/<key>"), so one
	// bucket can hold several stores. Optional.
	Prefix string
	// Region defaults to DefaultRegion.
	Region string

	// AccessKey and SecretKey (and SessionToken for temporary credentials)
	// sign requests. When AccessKey is empty, CredentialsFile is used.
	AccessKey, SecretKey, SessionToken string
	// CredentialsFile is an AWS shared credentials file (ini format) and
	// Profile the section to read (empty: AWS_PROFILE, else "default").
	CredentialsFile, Profile string

	// Insecure skips TLS certificate verification: only for test servers
	// with self-signed certificates.
	Insecure bool
}

// String describes the config without the secret or session token.
func (c S3Config) String() string {
	c.SecretKey = redact(c.SecretKey)
	c.SessionToken = redact(c.SessionToken)
	type plain S3Config // no String method: no recursion
	return fmt.Sprintf("%+v", plain(c))
}

// GoString keeps %#v from printing the secret too.
func (c S3Config) GoString() string { return "artifacts.S3Config" + c.String() }

func redact(s string) string {
	if s == "" {
		return ""
	}
	return "REDACTED"
}

// S3 is a Store in an S3 bucket, through minio-go with its default options
// (TrailingHeaders off: versitygw rejects signed streaming uploads with
// trailers). Objects become visible only when their upload completes, which
// is what makes Put atomic; integrity of blobs is checked end to end by
// FetchFile against their sha256.
type S3 struct {
	client   *minio.Client
	tr       *http.Transport
	endpoint *url.URL
	bucket   string
	prefix   string // "" or ending in "/"
	region   string
}

var _ Store = (*S3)(nil)

// NewS3 validates cfg and makes a client; it does not contact the server
// (Check does). Credentials from a file are read here, so a missing or
// malformed file is reported at once.
func NewS3(cfg S3Config) (*S3, error) {
	ep, err := parseEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	if err := s3utils.CheckValidBucketNameStrict(cfg.Bucket); err != nil {
		return nil, fmt.Errorf("S3 bucket name %q: %w", cfg.Bucket, err)
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		if err := CheckKey(prefix); err != nil {
			return nil, fmt.Errorf("S3 key prefix: %w", err)
		}
		prefix += "/"
	}
	region := cfg.Region
	if region == "" {
		region = DefaultRegion
	}

	var creds *credentials.Credentials
	switch {
	case cfg.AccessKey != "":
		if cfg.SecretKey == "" {
			return nil, fmt.Errorf("S3 access key is set but the secret key is empty: set AWS_SECRET_ACCESS_KEY (or S3_SECRET_KEY)")
		}
		creds = credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken)
	case cfg.CredentialsFile != "":
		creds = credentials.NewFileAWSCredentials(cfg.CredentialsFile, cfg.Profile)
		v, err := creds.GetWithContext(nil)
		if err != nil {
			return nil, fmt.Errorf("reading S3 credentials from %s (profile %s): %w", cfg.CredentialsFile, profileName(cfg.Profile), err)
		}
		if v.AccessKeyID == "" || v.SecretAccessKey == "" {
			return nil, fmt.Errorf("S3 credentials file %s (profile %s) has no aws_access_key_id / aws_secret_access_key", cfg.CredentialsFile, profileName(cfg.Profile))
		}
	default:
		return nil, errors.New("no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or S3_ACCESS_KEY and S3_SECRET_KEY), " +
			"or name a shared credentials file with TUNEFLEET_S3_CREDENTIALS_FILE or AWS_SHARED_CREDENTIALS_FILE")
	}

	secure := ep.Scheme == "https"
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, fmt.Errorf("S3 transport: %w", err)
	}
	if secure && cfg.Insecure {
		tr.TLSClientConfig.InsecureSkipVerify = true
	}
	// A store is one host, and tunefleet talks to it from many goroutines
	// at once (a nightly submits 16 models in parallel, each with parallel
	// lookups and uploads): minio-go's 16 idle connections per host made
	// every burst past 16 close connections and dial new ones, a TCP
	// handshake (and a TLS one on https) per request.
	tr.MaxIdleConnsPerHost = tr.MaxIdleConns
	client, err := minio.New(ep.Host, &minio.Options{
		Creds:     creds,
		Secure:    secure,
		Region:    region,
		Transport: lengthed{tr},
	})
	if err != nil {
		return nil, fmt.Errorf("S3 client for %s: %w", ep.Redacted(), err)
	}
	return &S3{client: client, tr: tr, endpoint: ep, bucket: cfg.Bucket, prefix: prefix, region: region}, nil
}

func profileName(p string) string {
	if p == "" {
		return "from AWS_PROFILE or default"
	}
	return p
}

// parseEndpoint accepts only scheme://host[:port]: minio-go takes a host and
// a Secure flag, and silently ignoring a path would send requests elsewhere.
func parseEndpoint(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("no S3 endpoint: add ?endpoint=http://host:port to the store URL or set S3_ENDPOINT")
	}
	u, err := url.Parse(raw)
	if err == nil && u.User != nil {
		return nil, fmt.Errorf("S3 endpoint must not carry credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY instead")
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("S3 endpoint %q must look like http://host:port or https://host[:port]", raw)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("S3 endpoint %q must be only scheme://host[:port], with no path or query", raw)
	}
	u.Path = ""
	return u, nil
}

// Endpoint is the server URL, Bucket the bucket and Prefix the key prefix
// ("" or ending in "/").
func (s *S3) Endpoint() string { return s.endpoint.String() }
func (s *S3) Bucket() string   { return s.bucket }
func (s *S3) Prefix() string   { return s.prefix }

// Close closes idle connections. Like Local, an S3 is an io.Closer, so a
// caller of Open can release any Store the same way.
func (s *S3) Close() error {
	s.tr.CloseIdleConnections()
	return nil
}

// String is the store URL Open accepts for this store.
func (s *S3) String() string {
	u := "s3://" + s.bucket
	if s.prefix != "" {
		u += "/" + strings.TrimSuffix(s.prefix, "/")
	}
	// The endpoint is left unescaped, for reading; it is only
	// scheme://host:port, which a query value may hold as is.
	return u + "?endpoint=" + s.endpoint.String() + "&region=" + url.QueryEscape(s.region)
}

// Put uploads r: a single PUT up to 16 MiB, a multipart upload above (or
// when the size is unknown). Parts of a reader that is also an io.ReaderAt
// (a file) are sent 4 at a time straight from it; a plain reader's go one
// after the other, at most one 16 MiB part held in memory. A reader that fails midway aborts the upload, and the
// previous object stays.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if size < -1 {
		return fmt.Errorf("put %q to %s: invalid size %d", key, s, size)
	}
	opts := minio.PutObjectOptions{ContentType: contentType(key)}
	if size >= 0 && size <= maxSignedPut {
		if err := s.putSigned(ctx, key, r, size, opts); err != nil {
			return s.opError(ctx, "put", key, err)
		}
		return nil
	}
	if size < 0 {
		opts.PartSize = unknownSizePartSize
	} else {
		// With a known size and an io.ReaderAt (a file, putOpen's
		// verifying reader), minio-go sends this many parts at once.
		opts.PartSize = uint64(uploadPartSize(size))
		opts.NumThreads = uploadThreads
	}
	if _, err := s.client.PutObject(ctx, s.bucket, s.prefix+key, noClose(r), size, opts); err != nil {
		return s.opError(ctx, "put", key, err)
	}
	return nil
}

func contentType(key string) string {
	if t := mime.TypeByExtension(path.Ext(key)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// noClose hides the caller's Close from minio-go, which closes request
// bodies that implement io.Closer; the reader belongs to the caller. Seek and
// ReadAt stay visible: they let minio-go retry and upload parts in parallel.
func noClose(r io.Reader) io.Reader {
	type readSeekerAt interface {
		io.ReadSeeker
		io.ReaderAt
	}
	switch v := r.(type) {
	case readSeekerAt:
		return struct{ readSeekerAt }{v}
	case io.ReadSeeker:
		return struct{ io.ReadSeeker }{v}
	default:
		return struct{ io.Reader }{r}
	}
}

// Get streams the object with one GET; a missing key wraps ErrNotExist.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	body, _, _, err := minio.Core{Client: s.client}.GetObject(ctx, s.bucket, s.prefix+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.opError(ctx, "get", key, err)
	}
	return body, nil
}

// Stat describes the object; a missing key wraps ErrNotExist.
func (s *S3) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := CheckKey(key); err != nil {
		return ObjectInfo{}, err
	}
	oi, err := s.client.StatObject(ctx, s.bucket, s.prefix+key, minio.StatObjectOptions{})
	if err != nil {
		return ObjectInfo{}, s.opError(ctx, "stat", key, err)
	}
	return ObjectInfo{Key: key, Size: oi.Size, ModTime: oi.LastModified}, nil
}

// List lists recursively under Prefix+prefix. Objects whose names are not
// valid keys (directory markers ending in "/", names made by other tools)
// are left out: no Store method could address them.
func (s *S3) List(ctx context.Context, prefix string) ([]string, error) {
	if err := CheckPrefix(prefix); err != nil {
		return nil, err
	}
	// Cancelling on return stops minio-go's listing goroutine when we leave
	// early on an error.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	keys := []string{}
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, s.opError(ctx, "list", prefix, obj.Err)
		}
		key, ok := strings.CutPrefix(obj.Key, s.prefix)
		if !ok || CheckKey(key) != nil {
			continue
		}
		keys = append(keys, key)
	}
	slices.Sort(keys) // S3 already sorts; other servers might not
	return keys, nil
}

// Delete removes the object; S3 answers success for a missing key.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := s.client.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{}); err != nil {
		if isCode(err, minio.NoSuchKey) {
			return nil
		}
		return s.opError(ctx, "delete", key, err)
	}
	return nil
}

// Check asks whether the bucket exists, within 5 s, and turns each way that
// can fail into one message naming what to fix.
func (s *S3) Check(ctx context.Context) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()

	if err := s.dial(ctx); err != nil {
		return s.unreachable(err)
	}
	ok, err := s.client.BucketExists(ctx, s.bucket)
	if err == nil && ok {
		return nil
	}
	// A HEAD answer has no error body, so minio-go sees only 403
	// AccessDenied or 404 NoSuchBucket, and versitygw answers an unknown
	// access key with 404. A listing's error body tells bad credentials
	// (InvalidAccessKeyId, SignatureDoesNotMatch, versitygw's
	// XAdminUserNotFound) from a missing bucket or missing rights.
	if parent.Err() == nil && ctx.Err() == nil {
		err = s.probeList(ctx)
	}
	if err == nil {
		return nil // the listing worked: the bucket is there after all
	}
	if perr := parent.Err(); perr != nil {
		return fmt.Errorf("check %s: %w", s, perr)
	}
	if c := s.classify(err); c != nil {
		return c
	}
	return fmt.Errorf("check %s: %w", s, err)
}

// probeList lists at most one key and returns the error, if any.
func (s *S3) probeList(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix, MaxKeys: 1}) {
		return obj.Err
	}
	return nil
}

// dial opens (and closes) a TCP connection to the endpoint, so that a
// server that is not running is reported at once instead of after
// minio-go's retries. Skipped when a proxy is configured for the endpoint,
// since requests would not go to it directly.
func (s *S3) dial(ctx context.Context) error {
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: s.endpoint}); err != nil || p != nil {
		return nil
	}
	host := s.endpoint.Host
	if s.endpoint.Port() == "" {
		port := "80"
		if s.endpoint.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(s.endpoint.Hostname(), port)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return err
	}
	return c.Close()
}

// S3Error is a failure that names what to fix (the endpoint, the bucket, the
// credentials); Err is the underlying error, if any.
type S3Error struct {
	Msg string
	Err error
}

func (e *S3Error) Error() string {
	if e.Err == nil {
		return e.Msg
	}
	return e.Msg + " (" + e.Err.Error() + ")"
}

func (e *S3Error) Unwrap() error { return e.Err }

func (s *S3) unreachable(err error) error {
	return &S3Error{
		Msg: fmt.Sprintf("S3 endpoint %s is unreachable: is the S3 server running? check --store / the endpoint", s.endpoint.Redacted()),
		Err: err,
	}
}

// classify turns the failures a user can fix into one clear message; nil
// when err is not one of them.
func (s *S3) classify(err error) error {
	ep := s.endpoint.Redacted()
	var er minio.ErrorResponse
	if !errors.As(err, &er) || (er.Code == "" && er.StatusCode == 0) {
		// No HTTP answer: connection refused, DNS, TLS, or our timeout.
		return s.unreachable(err)
	}
	switch er.Code {
	case minio.NoSuchBucket:
		return &S3Error{Msg: fmt.Sprintf("bucket %s does not exist at %s: create it (producer store init makes it with these credentials)", s.bucket, ep)}
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "InvalidSecurity",
		"XAdminUserNotFound": // versitygw's word for an unknown access key
		return &S3Error{Msg: fmt.Sprintf("S3 at %s rejected the credentials (%s): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or the credentials file", ep, er.Code)}
	case minio.AccessDenied:
		return &S3Error{Msg: fmt.Sprintf("S3 at %s denied access to bucket %s (AccessDenied): check that the credentials may read and write it", ep, s.bucket)}
	case "RequestTimeTooSkewed":
		return &S3Error{Msg: fmt.Sprintf("S3 at %s rejected the request time (RequestTimeTooSkewed): fix this machine's clock", ep)}
	case "AuthorizationHeaderMalformed", minio.InvalidRegion, "PermanentRedirect":
		msg := fmt.Sprintf("S3 at %s says bucket %s is not in region %s (%s): set region= in the store URL or S3_REGION", ep, s.bucket, s.region, er.Code)
		if er.Region != "" {
			msg += " to " + er.Region
		}
		return &S3Error{Msg: msg}
	}
	return nil
}

// opError wraps a failed operation on key: ErrNotExist for a missing key,
// the context's error when it ended, a clear message for the classes
// classify knows, else the S3 error.
func (s *S3) opError(ctx context.Context, op, key string, err error) error {
	if isCode(err, minio.NoSuchKey) {
		return fmt.Errorf("%s %q in %s: %w", op, key, s, ErrNotExist)
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%s %q in %s: %w", op, key, s, cerr)
	}
	// Only S3 answers are classified here: a transport error during a Put
	// may be the caller's reader failing, not an unreachable server.
	var er minio.ErrorResponse
	if errors.As(err, &er) && er.Code != "" {
		if c := s.classify(err); c != nil {
			return fmt.Errorf("%s %q: %w", op, key, c)
		}
	}
	return fmt.Errorf("%s %q in %s: %w", op, key, s, err)
}

func isCode(err error, code string) bool {
	var er minio.ErrorResponse
	return errors.As(err, &er) && er.Code == code
}
