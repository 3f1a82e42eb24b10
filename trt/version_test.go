package trt_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/testkit/trtreplay"
	"github.com/tunefleet/tunefleet/trt"
)

func TestDecodeVersionCode(t *testing.T) {
	for code, want := range map[int]trt.Version{
		8600:   {Major: 8, Minor: 6},
		8601:   {Major: 8, Minor: 6, Patch: 1},
		8203:   {Major: 8, Minor: 2, Patch: 3},
		8205:   {Major: 8, Minor: 2, Patch: 5},
		100300: {Major: 10, Minor: 3},
		101600: {Major: 10, Minor: 16},
		101601: {Major: 10, Minor: 16, Patch: 1},
		110100: {Major: 11, Minor: 1},
	} {
		got, err := trt.DecodeVersionCode(code)
		if err != nil || got != want {
			t.Errorf("DecodeVersionCode(%d) = %v, %v, want %v", code, got, err, want)
		}
	}
	if _, err := trt.DecodeVersionCode(72); err == nil {
		t.Error("DecodeVersionCode(72) accepted")
	}
}

// TestParseBannerFixtures: the version and build of every fixture log,
// from its banner, agreeing with its "TensorRT version:" line.
func TestParseBannerFixtures(t *testing.T) {
	want := map[string]string{
		fxTRT103:      "10.3.0",
		fxTRT86:       "8.6.0",
		fxTRT1016:     "10.16.0.72",
		fxDumpProfile: "10.16.0.72",
		fxPluginFail:  "10.16.0.72",
		fxTRT82Fail:   "8.2.3",
	}
	for _, name := range allLogs(t) {
		v, err := trt.ParseBanner(string(readFixture(t, name)))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if v.String() != want[name] {
			t.Errorf("%s: %s, want %s", name, v, want[name])
		}
	}
}

func TestParseBanner(t *testing.T) {
	cases := []struct {
		out  string
		want string
		err  string
	}{
		// What `trtexec --help` prints first.
		{"&&&& RUNNING TensorRT.trtexec [TensorRT v100800] [b43] # trtexec --help\n=== Model Options ===\n", "10.8.0.43", ""},
		{"&&&& RUNNING TensorRT.trtexec [TensorRT v8601] # /usr/src/tensorrt/bin/trtexec --help\n", "8.6.1", ""},
		{"[I] TensorRT version: 8.6.1\n", "8.6.1", ""},
		{"&&&& RUNNING TensorRT.trtexec [TensorRT v100300] # t\n[08/09/2024-23:19:08] [I] TensorRT version: 10.4.0\n", "", "but its log says"},
		{"trtexec: error while loading shared libraries: libnvinfer.so.10\n", "", "no TensorRT version"},
		{"", "", "no TensorRT version"},
	}
	for _, tc := range cases {
		v, err := trt.ParseBanner(tc.out)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseBanner(%q) = %v, %v; want error %q", tc.out, v, err, tc.err)
			}
			continue
		}
		if err != nil || v.String() != tc.want {
			t.Errorf("ParseBanner(%q) = %v, %v; want %s", tc.out, v, err, tc.want)
		}
	}
}

// TestDetectVersion runs the trtexec stand-in's --help.
func TestDetectVersion(t *testing.T) {
	env := trtreplay.WriteConfig(t, trtreplay.Config{Banner: "&&&& RUNNING TensorRT.trtexec [TensorRT v101600] [b72]", ArgvLog: filepath.Join(t.TempDir(), "argv")})
	k, v, _ := strings.Cut(env, "=")
	t.Setenv(k, v)
	got, err := trt.DetectVersion(context.Background(), trtreplay.Executable(t))
	if err != nil || got != (trt.Version{Major: 10, Minor: 16, Build: 72}) {
		t.Fatalf("DetectVersion = %v, %v", got, err)
	}
	if _, err := trt.DetectVersion(context.Background(), filepath.Join(t.TempDir(), "no-trtexec")); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing executable: %v", err)
	}
}
