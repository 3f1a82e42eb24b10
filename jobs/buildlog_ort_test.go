package jobs_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/schemas"
	"github.com/tunefleet/tunefleet/tuner"
)

// After a real run with ONNX Runtime, every build.log that result.json
// names is a non-empty blob that says which candidate it is about, the
// session options, the optimized model and the check's verdict with the
// largest error per output (issue 18: every log was the empty blob).
func TestBuildLogsOfARealORTRunSayWhatHappened(t *testing.T) {
	t.Parallel()
	env, _, _, ms := tuneMatMul(t, "")
	ctx := context.Background()
	logs := 0
	for _, sg := range ms.Graphs {
		var res tuner.Result
		if err := json.Unmarshal(storedDoc(t, env.store, sg.ResultKey, schemas.Result), &res); err != nil {
			t.Fatal(err)
		}
		for _, cr := range res.Results {
			for _, a := range cr.Artifacts {
				if a.Role != "log" {
					continue
				}
				logs++
				if a.Size == 0 || a.SHA256 == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
					t.Errorf("%s: log %s is empty", cr.Candidate, a.Path)
					continue
				}
				rc, err := env.store.Get(ctx, artifacts.BlobKey(a.SHA256))
				if err != nil {
					t.Fatalf("%s: log %s: %v", cr.Candidate, a.Path, err)
				}
				raw, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					t.Fatal(err)
				}
				text := string(raw)
				for _, want := range []string{cr.Candidate, "graph optimization", "optimized model", "check of ort:cpu:basic: passed", `"output"=`} {
					if !strings.Contains(text, want) {
						t.Errorf("%s: build.log lacks %q:\n%s", cr.Candidate, want, text)
					}
				}
			}
		}
	}
	if logs == 0 {
		t.Fatal("result.json names no build.log")
	}
}
