package cli

import (
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
)

func TestCheckCandidatesForTarget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		target string
		cands  string
		allow  bool
		want   []string // nil: accepted
	}{
		{"ort on cpu", "cpu", "ort:cpu:basic,ort:cpu:all", false, nil},
		{"trt on cpu", "cpu", "ort:cpu:basic,trt:fp16,trt:int8", false, []string{"trt:fp16, trt:int8", "--allow-trt-on-cpu", "--target cpu"}},
		{"trt on cpu, allowed", "cpu", "trt:fp16", true, nil},
		{"trt on a gpu class", "gpu.h100", "trt:fp16,ort:cpu:basic", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cands, err := backend.ParseCandidates(tt.cands)
			if err != nil {
				t.Fatal(err)
			}
			err = checkCandidatesForTarget(tt.target, cands, tt.allow)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "ort:cpu") {
				t.Errorf("error %q names candidates that are fine", err)
			}
		})
	}
}
