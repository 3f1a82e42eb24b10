package deploycheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var dockerfiles = []string{
	"deploy/docker/producer.Dockerfile",
	"deploy/docker/worker-cpu.Dockerfile",
	"deploy/docker/worker-gpu.Dockerfile",
}

// TestDockerfiles parses every image's Dockerfile with BuildKit's parser and
// checks it (CheckImage): pinned bases, COPY sources in the context, not
// root, a real CLI command, a /healthz probe.
func TestDockerfiles(t *testing.T) {
	root := repoRoot(t)
	found, _ := filepath.Glob(filepath.Join(root, "deploy/docker/*.Dockerfile"))
	if len(found) != len(dockerfiles) {
		t.Errorf("deploy/docker has %d Dockerfiles, the test knows %d: add the new one to dockerfiles", len(found), len(dockerfiles))
	}
	for _, df := range dockerfiles {
		t.Run(filepath.Base(df), func(t *testing.T) {
			img, err := ParseDockerfile(root, df)
			if err != nil {
				t.Fatal(err)
			}
			wantClean(t, CheckImage(root, img))
			if len(img.Copies) == 0 || len(img.Bases) < 3 {
				t.Errorf("%s: %d COPY sources and %d stages: not the multi-stage build expected", df, len(img.Copies), len(img.Bases))
			}
		})
	}
}

// TestDockerfileMistakes feeds mutated copies of the real Dockerfiles
// through the same checks: each mistake is refused with a message that
// names it.
func TestDockerfileMistakes(t *testing.T) {
	root := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "deploy/docker/worker-cpu.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(raw)
	for _, tc := range []struct {
		name, old, new string
		want           []string
	}{
		{"unpinned base", "debian:trixie-slim@sha256:d7e12182ce18b85b93007c1dedf31f2d29e01ccf3182cc4017c709b6259bc132", "debian:trixie-slim", []string{"FROM debian:trixie-slim is not pinned"}},
		{"missing COPY source", "COPY LICENSE NOTICE", "COPY LICENSE NOTES", []string{"COPY NOTES", "no such file"}},
		{"COPY of an ignored path", "COPY LICENSE NOTICE", "COPY third_party/onnxruntime", []string{"excluded from the build context by .dockerignore"}},
		{"root user", "USER 10001:10001", "USER root", []string{"runs as root"}},
		{"renamed flag", `"--concurrency", "2"`, `"--jobs", "2"`, []string{"unknown flag: --jobs"}},
		{"not our command", `ENTRYPOINT ["worker"]`, `ENTRYPOINT ["/bin/sh", "-c"]`, []string{"is not one of our binaries"}},
		{"shell form", `ENTRYPOINT ["worker"]`, `ENTRYPOINT worker`, []string{"shell form"}},
		{"healthcheck elsewhere", "8081/healthz\"]", "8081/metrics\"]", []string{"does not probe a /healthz"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, err := parseDockerfile("worker-cpu.Dockerfile", strings.NewReader(mutate(t, src, tc.old, tc.new)))
			if err != nil {
				t.Fatal(err)
			}
			errs := CheckImage(root, img)
			wantOneOf(t, errs, tc.want...)
		})
	}
}
