package tuner_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tunefleet/tunefleet/schemas"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// Every result.json the tuner writes, with a winner or with every
// candidate failed, validates against schemas/result.schema.json.
func TestResultsValidateAgainstTheSchema(t *testing.T) {
	for _, tc := range []struct {
		name    string
		perturb bool
	}{{"winner", false}, {"every candidate wrong", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := realBundle(t)
			if tc.perturb {
				perturb(t, dir, "1", 0.5)
			}
			out := t.TempDir()
			r, err := tuner.TuneGraph(context.Background(), open(t, dir), "0", out, quickOptions(t, strategy.MaxThroughput, "ort:cpu:basic,ort:cpu:extended"))
			if err != nil {
				t.Fatal(err)
			}
			if r.OK() == tc.perturb {
				t.Fatalf("winner %+v, failure %+v", r.Winner, r.Failure)
			}
			raw, err := os.ReadFile(filepath.Join(out, tuner.ResultFile))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := schemas.ValidateJSON(schemas.Result, "", raw); err != nil {
				t.Errorf("result.json does not validate: %v", err)
			}
		})
	}
}
