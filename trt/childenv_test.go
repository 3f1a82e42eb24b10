package trt_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/trt"
)

// trtexec gets a minimal environment: the worker's S3 keys and Redis
// password are not in it, the task's GPU and what it is given are (issue
// 8, item 7). The executable is the real env(1), which prints what it got.
func TestTrtexecDoesNotSeeSecrets(t *testing.T) {
	secrets := map[string]string{
		"AWS_SECRET_ACCESS_KEY":    "aws-s3cr3t",
		"AWS_ACCESS_KEY_ID":        "aws-id-s3cr3t",
		"MINIO_ROOT_PASSWORD":      "minio-s3cr3t",
		"TUNEFLEET_REDIS_PASSWORD": "redis-s3cr3t",
		"TUNEFLEET_REDIS":          "redis://:url-s3cr3t@127.0.0.1:6379/0",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("LD_LIBRARY_PATH", "/opt/tensorrt/lib")
	log := filepath.Join(t.TempDir(), "trtexec.log")
	out, err := trt.Run(context.Background(), trt.Invocation{Exe: "env", Dir: t.TempDir(), LogPath: log, Env: []string{"CUDA_VISIBLE_DEVICES=GPU-x"}})
	if err != nil || !out.Exit.Success() {
		t.Fatalf("env: %v, %v", out.Exit, err)
	}
	env, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range secrets {
		if strings.Contains(string(env), v) {
			t.Errorf("trtexec sees $%s", k)
		}
	}
	for _, want := range []string{"PATH=", "LD_LIBRARY_PATH=/opt/tensorrt/lib", "CUDA_VISIBLE_DEVICES=GPU-x"} {
		if !strings.Contains(string(env), want) {
			t.Errorf("trtexec's environment lacks %s:\n%s", want, env)
		}
	}
}
