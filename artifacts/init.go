package artifacts

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/minio/minio-go/v7"
)

// Init makes the store a URL names, with the credentials Open would use:
// a local directory is created, an S3 bucket is made in the URL's region.
// It reports whether it made something (false: it was there already, which
// is fine: init may run on every deploy), then checks the store as Open
// does.
func Init(ctx context.Context, rawURL string) (Store, bool, error) {
	loc, err := parseURL(rawURL, os.Getenv)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrBadURL, err)
	}
	made := false
	if loc.s3 == nil {
		if _, err := os.Stat(loc.dir); errors.Is(err, os.ErrNotExist) {
			made = true
		}
	} else {
		s, err := NewS3(*loc.s3)
		if err != nil {
			return nil, false, err
		}
		made, err = s.MakeBucket(ctx)
		s.Close()
		if err != nil {
			return nil, false, err
		}
	}
	st, err := Open(ctx, rawURL)
	return st, made, err
}

// MakeBucket makes the store's bucket in its region; false when it was
// there already (and this store's credentials own it).
func (s *S3) MakeBucket(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	if err := s.dial(ctx); err != nil {
		return false, s.unreachable(err)
	}
	err := s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: s.region})
	if err == nil {
		return true, nil
	}
	var er minio.ErrorResponse
	if errors.As(err, &er) && (er.Code == "BucketAlreadyOwnedByYou" || er.Code == "BucketAlreadyExists") {
		// Already there (ours, or one Open's check then says whether
		// these credentials may use).
		return false, nil
	}
	if c := s.classify(err); c != nil {
		return false, c
	}
	return false, fmt.Errorf("make bucket %s at %s: %w", s.bucket, s.endpoint.Redacted(), err)
}
