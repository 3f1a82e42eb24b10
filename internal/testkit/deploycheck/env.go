package deploycheck

import (
	"fmt"
	"slices"
	"sort"
)

// BinaryEnv is every environment variable the producer and worker read
// (their own code; TestBinaryEnvIsWhatTheSourceReads keeps it equal to the
// os.Getenv, os.LookupEnv and getenv calls of the packages cmd/ links).
var BinaryEnv = []string{
	"AWS_ACCESS_KEY_ID",
	"AWS_PROFILE",
	"AWS_SECRET_ACCESS_KEY",
	"AWS_SESSION_TOKEN",
	"AWS_SHARED_CREDENTIALS_FILE",
	"ONNXRUNTIME_SHARED_LIBRARY_PATH",
	"S3_ACCESS_KEY",
	"S3_ENDPOINT",
	"S3_REGION",
	"S3_SECRET_KEY",
	"TUNEFLEET_CHILD_ENV",
	"TUNEFLEET_CLASSES",
	"TUNEFLEET_DIGEST_CACHE",
	"TUNEFLEET_NOTIFY_RETRY_FOR",
	"TUNEFLEET_ORT_CHILD",
	"TUNEFLEET_REDIS",
	"TUNEFLEET_REDIS_PASSWORD",
	"TUNEFLEET_REPLAY",
	"TUNEFLEET_S3_CREDENTIALS_FILE",
	"TUNEFLEET_S3_ENDPOINT",
	"TUNEFLEET_SEEN",
	"TUNEFLEET_SIGN_KEY",
	"TUNEFLEET_STORE",
	"TUNEFLEET_WEB_PASSWORD",
	"TUNEFLEET_WEB_TOKEN",
	"TUNEFLEET_WEB_USER",
	"TUNEFLEET_WORK_DIR",
	"XDG_STATE_HOME",
}

// internalEnv are read by the binaries but are theirs to set: the ONNX
// Runtime child is the binary itself, started with TUNEFLEET_ORT_CHILD=1;
// a manifest that set it would turn a worker into a child.
var internalEnv = map[string]string{
	"TUNEFLEET_ORT_CHILD": "the binary sets it for its own ONNX Runtime child",
	"TUNEFLEET_REPLAY":    "a simulation tool (make bench-fleet): a worker with it set builds no engine",
}

// CheckEnv checks the names of the variables set for one of our binaries:
// each must be one it reads and may be set from outside. where names the
// manifest and service for the message.
func CheckEnv(where string, names []string) []error {
	sorted := slices.Clone(names)
	sort.Strings(sorted)
	var errs []error
	for _, n := range sorted {
		if why, ok := internalEnv[n]; ok {
			errs = append(errs, fmt.Errorf("%s: sets %s, which must not be set from outside: %s", where, n, why))
			continue
		}
		if !slices.Contains(BinaryEnv, n) {
			errs = append(errs, fmt.Errorf("%s: sets %s, which neither producer nor worker reads (they read: %v)", where, n, BinaryEnv))
		}
	}
	return errs
}
