package deploycheck

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// composeProfiles are every combination of the compose file's profiles.
var composeProfiles = [][]string{nil, {"gpu"}, {"web"}, {"gpu", "web"}}

// TestCompose loads docker-compose.yml with compose-go, schema validation
// on, for every profile, and checks the services of our images.
func TestCompose(t *testing.T) {
	root := repoRoot(t)
	file := filepath.Join(root, "docker-compose.yml")
	for _, profiles := range composeProfiles {
		t.Run(fmtProfiles(profiles), func(t *testing.T) {
			p, err := LoadCompose(context.Background(), file, filepath.Join(root, ".env.example"), profiles)
			if err != nil {
				t.Fatal(err)
			}
			wantClean(t, CheckCompose(root, p))
			wantClean(t, CheckComposeImages(root, p))
			want := []string{"redis", "s3", "s3-init", "worker-cpu", "producer", "asynqmon"}
			if slices.Contains(profiles, "gpu") {
				want = append(want, "worker-gpu")
			}
			if slices.Contains(profiles, "web") {
				want = append(want, "web")
			}
			for _, name := range want {
				if _, ok := p.Services[name]; !ok {
					t.Errorf("profiles %v: no service %s", profiles, name)
				}
			}
			if len(p.Services) != len(want) {
				t.Errorf("profiles %v: %d services, want %v", profiles, len(p.Services), want)
			}
		})
	}
	for _, e := range CheckNoLiteralSecrets(file) {
		t.Error(e)
	}
}

// TestComposeGPUReservation: the gpu profile's worker reserves NVIDIA
// devices, so Docker starts it with the NVIDIA runtime.
func TestComposeGPUReservation(t *testing.T) {
	root := repoRoot(t)
	p, err := LoadCompose(context.Background(), filepath.Join(root, "docker-compose.yml"), filepath.Join(root, ".env.example"), []string{"gpu"})
	if err != nil {
		t.Fatal(err)
	}
	svc := p.Services["worker-gpu"]
	if svc.Deploy == nil || svc.Deploy.Resources.Reservations == nil || len(svc.Deploy.Resources.Reservations.Devices) == 0 {
		t.Fatal("worker-gpu reserves no device")
	}
	d := svc.Deploy.Resources.Reservations.Devices[0]
	if d.Driver != "nvidia" || !slices.Contains(d.Capabilities, "gpu") {
		t.Errorf("worker-gpu reserves %+v, want driver nvidia with capability gpu", d)
	}
}

// TestComposeMistakes feeds mutated copies of docker-compose.yml through
// the same loader and checks.
func TestComposeMistakes(t *testing.T) {
	root := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, old, new string
		want           []string
	}{
		{"typo'd key", "    stop_grace_period: 45s", "    stop_grace_periode: 45s", []string{"stop_grace_periode"}},
		{"renamed flag", `"--concurrency", "2"`, `"--workers", "2"`, []string{"service worker-cpu", "unknown flag: --workers"}},
		{"variable nobody reads", "  TUNEFLEET_STORE: s3", "  TUNEFLEET_S3: x\n  TUNEFLEET_STORE: s3", []string{"sets TUNEFLEET_S3, which neither producer nor worker reads"}},
		{"literal secret", "AWS_SECRET_ACCESS_KEY: ${AWS_SECRET_ACCESS_KEY:?set AWS_SECRET_ACCESS_KEY in .env (see .env.example)}", "AWS_SECRET_ACCESS_KEY: hunter2", []string{"AWS_SECRET_ACCESS_KEY is given literally"}},
		{"short grace", "stop_grace_period: 45s", "stop_grace_period: 20s", []string{"not longer than --shutdown-timeout 30s"}},
		{"tag-only pin", "minio/mc:RELEASE.2025-08-13T08-35-41Z@sha256:a7fe349ef4bd8521fb8497f55c6042871b2ae640607cf99d9bede5e9bdf11727", "minio/mc:RELEASE.2025-08-13T08-35-41Z", []string{"service s3-init: image minio/mc:RELEASE.2025-08-13T08-35-41Z is pinned by tag only"}},
		{"asynqmon pulled by tag", "    build:\n      context: .\n      dockerfile: deploy/docker/third-party/asynqmon.Dockerfile\n    image: tunefleet/asynqmon:0.7.2", "    image: hibiken/asynqmon:0.7.2", []string{"service asynqmon: image hibiken/asynqmon:0.7.2 is pinned by tag only"}},
		{"asynqmon writable", `      READ_ONLY: "true"`, `      READ_ONLY: "false"`, []string{"asynqmon must run read-only"}},
		{"asynqmon published", `"127.0.0.1:8980:8080"`, `"8980:8080"`, []string{"asynqmon has no authentication; publish it on 127.0.0.1 only"}},
		{"internal variable", "  TUNEFLEET_STORE: s3", "  TUNEFLEET_ORT_CHILD: \"1\"\n  TUNEFLEET_STORE: s3", []string{"TUNEFLEET_ORT_CHILD, which must not be set"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "docker-compose.yml")
			if err := os.WriteFile(file, []byte(mutate(t, string(raw), tc.old, tc.new)), 0o644); err != nil {
				t.Fatal(err)
			}
			errs := CheckNoLiteralSecrets(file)
			p, err := LoadCompose(context.Background(), file, filepath.Join(root, ".env.example"), nil)
			if err != nil {
				errs = append(errs, err)
			} else {
				cerrs := append(CheckCompose(root, p), CheckComposeImages(root, p)...)
				errs = append(errs, cerrs...)
			}
			wantOneOf(t, errs, tc.want...)
		})
	}
}

func fmtProfiles(p []string) string {
	if len(p) == 0 {
		return "default"
	}
	return filepath.Join(p...)
}
