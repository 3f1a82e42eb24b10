package artifacts

import (
	"errors"
	"fmt"
	"strings"
)

// MaxKeyLen is the longest key S3 takes (1,024 bytes of UTF-8); a local
// store holds the same keys.
const MaxKeyLen = 1024

// ErrBadKey is wrapped by the error of a key no store can hold: retrying
// cannot help.
var ErrBadKey = errors.New("bad object key")

// The bucket layout (DESIGN.md), the same for S3 and a local directory.
//
//	blobs/sha256/<hex>                         content-addressed: onnx, samples, engines, logs
//	runs/<run>/run.json                        the submission
//	runs/<run>/graphs/<graph>/result.json      per-graph result (the attempt that completed it)
//	runs/<run>/graphs/<graph>/attempts/<n>/result.json   every attempt's own result
//	runs/<run>/state.json                      module state manifest
//	runs/<run>/report.html                     the run for a person: charts, every candidate (finalize)
//	runs/<run>/attestation.intoto.jsonl        signed provenance, when finalize has a signing key
//	results/<platform>/<workkey>.json          result index (incremental runs)
//	results/<platform>/<workkey>.failed/<candidate>.json   negative cache: a deterministic failure
//	models/<model>/<platform>/latest.json      what deploy tooling resolves
//	timing-caches/<platform>/<name>            shared TensorRT timing caches

// BlobKey is where the blob with this sha256 (hex) lives.
func BlobKey(sha256hex string) string { return "blobs/sha256/" + sha256hex }

// RunKey is the submission record of a run.
func RunKey(run string) string { return "runs/" + run + "/run.json" }

// GraphResultKey is the result of one graph of a run.
func GraphResultKey(run, graph string) string {
	return "runs/" + run + "/graphs/" + graph + "/result.json"
}

// GraphAttemptResultKey is the result one attempt (1, 2, ...) of a graph's
// task wrote. Attempts never share a key: a late duplicate (a worker taken
// for dead that was only slow) cannot overwrite the result of the attempt
// that completed the graph; finalize publishes that one at GraphResultKey.
func GraphAttemptResultKey(run, graph string, attempt int) string {
	return fmt.Sprintf("runs/%s/graphs/%s/attempts/%d/result.json", run, graph, attempt)
}

// StateKey is the module state manifest of a run.
func StateKey(run string) string { return "runs/" + run + "/state.json" }

// AttestationKey is a run's signed provenance: DSSE envelopes of in-toto
// Statements, one per line (package provenance), written by finalize when
// it has a signing key.
func AttestationKey(run string) string { return "runs/" + run + "/attestation.intoto.jsonl" }

// LayoutAttestationKey is the signed attestation of a run fetched in one
// layout (tunefleet, triton, aitune): every file of the directory fetch
// lays out, by its path there (package provenance's SignLayout), written
// by finalize with a signing key, before AttestationKey.
func LayoutAttestationKey(run, layout string) string {
	return "runs/" + run + "/layouts/" + layout + ".intoto.jsonl"
}

// RunReportKey is a run's self-contained HTML report, written by finalize.
func RunReportKey(run string) string { return "runs/" + run + "/report.html" }

// ResultIndexKey is the indexed result of a work key on a platform: the
// same work gives different engines and timings on different platforms.
func ResultIndexKey(platform, workKey string) string {
	return "results/" + platform + "/" + workKey + ".json"
}

// NegativeCacheKey records that candidate failed deterministically on a
// work key on a platform (jobs' negative cache), beside the result index.
func NegativeCacheKey(platform, workKey, candidate string) string {
	return NegativeCachePrefix(platform, workKey) + candidate + ".json"
}

// NegativeCachePrefix is where the negative cache of a work key on a
// platform keeps its entries, one per candidate.
func NegativeCachePrefix(platform, workKey string) string {
	return "results/" + platform + "/" + workKey + ".failed/"
}

// LatestKey is the pointer to the newest good state of a model on a
// platform.
func LatestKey(model, platform string) string {
	return "models/" + model + "/" + platform + "/latest.json"
}

// LatestPointerKey is the signed form of latest.json (when finalize
// signs): one DSSE envelope whose Statement names the state and says the
// pointer's sequence and time (package provenance's Pointer).
func LatestPointerKey(model, platform string) string {
	return "models/" + model + "/" + platform + "/latest.intoto.jsonl"
}

// TimingCacheKey is a shared TensorRT timing cache.
func TimingCacheKey(platform, name string) string {
	return "timing-caches/" + platform + "/" + name
}

// CheckKey rejects keys that could escape a local store's root or confuse
// S3: empty, absolute, with "." or ".." segments, empty segments,
// backslashes or control characters.
func CheckKey(key string) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("%w: %w", ErrBadKey, err)
	}
	return nil
}

func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("empty object key")
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("object key %.60q… is %d bytes, over S3's limit of %d", key, len(key), MaxKeyLen)
	}
	if strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") {
		return fmt.Errorf("object key %q must not start or end with '/'", key)
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return fmt.Errorf("object key %q contains a control character or backslash", key)
		}
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("object key %q has an empty, \".\" or \"..\" segment", key)
		}
	}
	return nil
}

// CheckPrefix rejects List prefixes that could escape a local store's root.
// A prefix is matched as a plain string against whole keys (as S3 does), so
// its last segment may be partial ("runs/r1" also matches "runs/r10/…"; end
// it with "/" to mean a directory), but every complete segment before the
// last "/" must be a valid key segment. The empty prefix lists everything.
func CheckPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if strings.HasPrefix(prefix, "/") {
		return fmt.Errorf("list prefix %q must not start with '/'", prefix)
	}
	for _, r := range prefix {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return fmt.Errorf("list prefix %q contains a control character or backslash", prefix)
		}
	}
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		for _, seg := range strings.Split(prefix[:i], "/") {
			if seg == "" || seg == "." || seg == ".." {
				return fmt.Errorf("list prefix %q has an empty, \".\" or \"..\" segment", prefix)
			}
		}
	}
	return nil
}
