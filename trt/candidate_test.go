package trt_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/trt"
)

func TestParseConfig(t *testing.T) {
	cases := []struct {
		cand string
		want trt.Config
		str  string
	}{
		{"trt", trt.Config{OptLevel: -1}, "trt:fp32"},
		{"trt:fp32", trt.Config{OptLevel: -1}, "trt:fp32"},
		{"trt:fp32:noTF32", trt.Config{NoTF32: true, OptLevel: -1}, "trt:fp32:noTF32"},
		{"trt:fp16", trt.Config{Weak: []trt.Precision{trt.FP16}, OptLevel: -1}, "trt:fp16"},
		{"trt:bf16", trt.Config{Weak: []trt.Precision{trt.BF16}, OptLevel: -1}, "trt:bf16"},
		{"trt:int8", trt.Config{Weak: []trt.Precision{trt.INT8}, OptLevel: -1}, "trt:int8"},
		{"trt:int8:calib=cache/calib.bin", trt.Config{Weak: []trt.Precision{trt.INT8}, Calib: "cache/calib.bin", OptLevel: -1}, "trt:int8:calib=cache/calib.bin"},
		{"trt:fp8", trt.Config{Weak: []trt.Precision{trt.FP8}, OptLevel: -1}, "trt:fp8"},
		{"trt:best", trt.Config{Weak: []trt.Precision{trt.Best}, OptLevel: -1}, "trt:best"},
		{"trt:best:calib=c.bin", trt.Config{Weak: []trt.Precision{trt.Best}, Calib: "c.bin", OptLevel: -1}, "trt:best:calib=c.bin"},
		{"trt:strongly-typed", trt.Config{StronglyTyped: true, OptLevel: -1}, "trt:strongly-typed"},
		{"trt:int8:fp16:opt=5:workspace=4096", trt.Config{Weak: []trt.Precision{trt.FP16, trt.INT8}, OptLevel: 5, WorkspaceMiB: 4096}, "trt:fp16:int8:opt=5:workspace=4096"},
		{"trt:fp16:opt=0", trt.Config{Weak: []trt.Precision{trt.FP16}, OptLevel: 0}, "trt:fp16:opt=0"},
		{"trt:fp16:notf32", trt.Config{Weak: []trt.Precision{trt.FP16}, NoTF32: true, OptLevel: -1}, "trt:fp16:noTF32"},
	}
	for _, tc := range cases {
		got, err := trt.ParseConfig(mustCandidate(t, tc.cand))
		if err != nil {
			t.Errorf("%s: %v", tc.cand, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.cand, got, tc.want)
		}
		if got.String() != tc.str {
			t.Errorf("%s: String = %s, want %s", tc.cand, got, tc.str)
		}
		// The canonical string parses back to the same config.
		again, err := trt.ParseConfig(mustCandidate(t, got.String()))
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("%s: round trip %+v, %v", tc.cand, again, err)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	for cand, want := range map[string]string{
		"ort:cpu":                   "not a trt candidate",
		"trt:fp64":                  `unknown part "fp64"`,
		"trt:fp16:fp16":             "given twice",
		"trt:fp32:fp16":             "cannot be combined with fp16",
		"trt:strongly-typed:fp16":   "from the ONNX model",
		"trt:best:fp16":             "write trt:best alone",
		"trt:fp8:int8":              "fp8 and int8",
		"trt:stronglyTyped":         "write strongly-typed",
		"trt:fp16:opt=6":            "from 0 to 5",
		"trt:fp16:opt=x":            "from 0 to 5",
		"trt:fp16:workspace=4G":     "without a unit",
		"trt:fp16:calib=c.bin":      "needs int8 or best",
		"trt:int8:calib=a'b":        "quote",
		"trt:fp16:threads=4":        "unknown option",
		"trt:fp16:timing=x":         "unknown option",
		"trt:fp16:workspace=0":      "from 1",
		"trt:fp16:workspace=1024MB": "without a unit",
	} {
		_, err := trt.ParseConfig(mustCandidate(t, cand))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", cand, err, want)
		}
		if b := trt.New(trt.Options{}); b.Validate(mustCandidate(t, cand)) == nil {
			t.Errorf("Backend.Validate(%s) accepted it", cand)
		}
	}
}

func TestSupportedVersions(t *testing.T) {
	cfg := mustConfig(t, "trt:fp32")
	for _, v := range []trt.Version{{Major: 8, Minor: 6}, {Major: 8, Minor: 6, Patch: 1, Build: 6}, {Major: 10}, {Major: 10, Minor: 16, Build: 72}, {Major: 11, Minor: 1}} {
		if err := cfg.Supported(v); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	for _, v := range []trt.Version{{Major: 8, Minor: 5, Patch: 3}, {Major: 8, Minor: 2, Patch: 3}, {Major: 7, Minor: 2}, {Major: 9, Minor: 2}, {Major: 12}} {
		err := cfg.Supported(v)
		var ue *trt.UnsupportedError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "8.6, 10.x and 11.x") {
			t.Errorf("%s: %v, want an UnsupportedError naming the supported versions", v, err)
		}
	}
}
