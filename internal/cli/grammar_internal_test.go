package cli

import "testing"

// The state: line names a place a user can go: an s3:// object URL with
// the endpoint and region beside it (not s3://tuning?endpoint=…/runs/…),
// or a local path.
func TestStoreLocation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ store, want string }{
		{"s3://tuning?endpoint=http://127.0.0.1:9000&region=us-east-1", "s3://tuning/runs/r1/state.json (endpoint http://127.0.0.1:9000, region us-east-1)"},
		{"s3://tuning/team/a?endpoint=https://s3.example", "s3://tuning/team/a/runs/r1/state.json (endpoint https://s3.example)"},
		{"s3://tuning/", "s3://tuning/runs/r1/state.json"},
		{"file:///var/lib/tunefleet", "/var/lib/tunefleet/runs/r1/state.json"},
		{"file://tunefleet-data/", "tunefleet-data/runs/r1/state.json"},
	} {
		if got := storeLocation(tc.store, "runs/r1/state.json"); got != tc.want {
			t.Errorf("storeLocation(%q) = %q, want %q", tc.store, got, tc.want)
		}
	}
}
