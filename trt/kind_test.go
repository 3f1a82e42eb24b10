package trt_test

import (
	"fmt"
	"testing"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/trt"
)

func TestFailureKindIsRecorded(t *testing.T) {
	e := &trt.Error{Stage: trt.StageBuild, Classification: trt.Classification{Class: backend.FailInfrastructure, Kind: trt.KindBuildOOM, Reason: "out of GPU memory"}}
	err := fmt.Errorf("candidate trt:fp16: %w", backend.Fail(backend.FailInfrastructure, "build", e))
	fi := backend.InfoOf(err, backend.FailBuild)
	if fi.Kind != trt.KindBuildOOM || fi.Class != backend.FailInfrastructure || fi.Op != "build" {
		t.Fatalf("recorded %+v, want kind %s", fi, trt.KindBuildOOM)
	}
}
