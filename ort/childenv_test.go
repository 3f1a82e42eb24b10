package ort_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/ort"
)

// The session child gets a minimal environment: the worker's S3 keys and
// Redis password are not in it (issue 8, item 7). The child here is a real
// process, a shell that saves its environment where the test can read it.
func TestSessionChildDoesNotSeeSecrets(t *testing.T) {
	if _, err := ort.FindLibrary(""); err != nil {
		t.Skip(err) // Build looks for it before it starts the child
	}
	secrets := map[string]string{
		"AWS_SECRET_ACCESS_KEY":    "aws-s3cr3t",
		"MINIO_ROOT_PASSWORD":      "minio-s3cr3t",
		"TUNEFLEET_REDIS_PASSWORD": "redis-s3cr3t",
		"TUNEFLEET_REDIS":          "redis://:url-s3cr3t@127.0.0.1:6379/0",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("CUDA_VISIBLE_DEVICES", "GPU-kept")
	dump := filepath.Join(t.TempDir(), "env")
	b := ort.New(ort.Options{Command: []string{"/bin/sh", "-c", "env > " + dump}})
	cands, _ := backend.ParseCandidates("ort:cpu:basic")
	_, err := b.Build(context.Background(), backend.BuildRequest{
		Graph:     bundle.Graph{Name: "0"},
		ONNXPath:  filepath.Join(t.TempDir(), "model.onnx"),
		Candidate: cands[0], WorkDir: t.TempDir(),
	})
	if err == nil {
		t.Fatal("a child that exits at once built an engine")
	}
	env, rerr := os.ReadFile(dump)
	if rerr != nil {
		t.Fatalf("the child did not run: %v (build: %v)", rerr, err)
	}
	for k, v := range secrets {
		if strings.Contains(string(env), v) {
			t.Errorf("the session child sees $%s", k)
		}
	}
	for _, want := range []string{"PATH=", ort.ChildEnv + "=1", "CUDA_VISIBLE_DEVICES=GPU-kept"} {
		if !strings.Contains(string(env), want) {
			t.Errorf("the session child's environment lacks %s:\n%s", want, env)
		}
	}
}
