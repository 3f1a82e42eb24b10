package artifacts

// ParseURLForTest exposes parseURL (with an injected environment) to the
// external tests, which cannot be in this package: they use storetest,
// which imports it.
func ParseURLForTest(raw string, getenv func(string) string) (dir string, s3 *S3Config, err error) {
	loc, err := parseURL(raw, getenv)
	return loc.dir, loc.s3, err
}
