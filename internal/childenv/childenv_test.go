package childenv_test

import (
	"slices"
	"testing"

	"github.com/tunefleet/tunefleet/internal/childenv"
)

func TestMinimal(t *testing.T) {
	parent := []string{
		"PATH=/usr/bin", "HOME=/root", "LC_ALL=C", "CUDA_VISIBLE_DEVICES=GPU-1", "NVIDIA_DRIVER_CAPABILITIES=all",
		"AWS_SECRET_ACCESS_KEY=s", "AWS_ACCESS_KEY_ID=i", "MINIO_ROOT_PASSWORD=m", "TUNEFLEET_REDIS_PASSWORD=r",
		"TUNEFLEET_REDIS=redis://:p@h/0", "TUNEFLEET_S3_CREDENTIALS_FILE=/c", "GITHUB_TOKEN=g", "PATHOLOGICAL=x", "noequals",
	}
	got := childenv.Minimal(parent, "TUNEFLEET_ORT_CHILD=1")
	want := []string{"PATH=/usr/bin", "HOME=/root", "LC_ALL=C", "CUDA_VISIBLE_DEVICES=GPU-1", "NVIDIA_DRIVER_CAPABILITIES=all", "TUNEFLEET_ORT_CHILD=1"}
	if !slices.Equal(got, want) {
		t.Errorf("Minimal = %q, want %q", got, want)
	}
	// An operator can pass more by name.
	t.Setenv(childenv.ExtraEnv, "HTTPS_PROXY, NO_PROXY")
	got = childenv.Minimal([]string{"HTTPS_PROXY=http://p", "NO_PROXY=x", "AWS_SECRET_ACCESS_KEY=s"})
	if want := []string{"HTTPS_PROXY=http://p", "NO_PROXY=x"}; !slices.Equal(got, want) {
		t.Errorf("with $%s: Minimal = %q, want %q", childenv.ExtraEnv, got, want)
	}
}
