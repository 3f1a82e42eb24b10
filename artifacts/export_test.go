package artifacts

import (
	"net/http"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// ParseURLForTest exposes parseURL (with an injected environment) to the
// external tests, which cannot be in this package: they use storetest,
// which imports it.
func ParseURLForTest(raw string, getenv func(string) string) (dir string, s3 *S3Config, err error) {
	loc, err := parseURL(raw, getenv)
	return loc.dir, loc.s3, err
}

// NewS3WithTransport is NewS3 whose requests go through wrap (a counting
// RoundTripper in the transfer benchmark).
func NewS3WithTransport(cfg S3Config, wrap func(http.RoundTripper) http.RoundTripper) (*S3, error) {
	s, err := NewS3(cfg)
	if err != nil {
		return nil, err
	}
	rt := wrap(s.tr)
	c, err := minio.New(s.endpoint.Host, &minio.Options{Creds: credentialsOf(cfg), Secure: s.endpoint.Scheme == "https", Region: s.region, Transport: rt})
	if err != nil {
		return nil, err
	}
	s.client = c
	return s, nil
}

func credentialsOf(cfg S3Config) *credentials.Credentials {
	return credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken)
}
