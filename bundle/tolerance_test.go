package bundle_test

import (
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/bundle"
)

func TestParseToleranceOverride(t *testing.T) {
	tests := []struct {
		in      string
		rtol    bool
		want    bundle.ToleranceOverride
		wantErr string
	}{
		{in: "1e-3", want: bundle.ToleranceOverride{Value: 1e-3}},
		{in: "logits=0.01", rtol: true, want: bundle.ToleranceOverride{Output: "logits", RTol: true, Value: 0.01}},
		{in: "a=b=2", want: bundle.ToleranceOverride{Output: "a=b", Value: 2}},
		{in: "=1", wantErr: "output name before '=' is empty"},
		{in: "-1", wantErr: "not a finite non-negative number"},
		{in: "x=NaN", wantErr: "not a finite non-negative number"},
		{in: "x=", rtol: true, wantErr: "--rtol"},
	}
	for _, tt := range tests {
		got, err := bundle.ParseToleranceOverride(tt.in, tt.rtol)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestApplyTolerances(t *testing.T) {
	m := bundle.Manifest{Graphs: []bundle.Graph{{Name: "0", Outputs: []bundle.TensorDecl{
		{DType: bundle.Float32}, {DType: bundle.Int64},
	}}}}
	m.Graphs[0].Outputs[0].Name, m.Graphs[0].Outputs[1].Name = "y", "ids"
	// The named override wins over the unnamed one, whichever comes first.
	err := bundle.ApplyTolerances(&m, []bundle.ToleranceOverride{{Output: "y", Value: 0.5}, {Value: 0.1}, {RTol: true, Value: 0.2}})
	if err != nil {
		t.Fatal(err)
	}
	tol := m.Graphs[0].Tolerances
	if y := tol["y"]; y.ATol == nil || *y.ATol != 0.5 || y.RTol == nil || *y.RTol != 0.2 {
		t.Errorf("y: %+v", y)
	}
	if _, ok := tol["ids"]; ok {
		t.Error("an integer output got a tolerance from an unnamed override")
	}
	err = bundle.ApplyTolerances(&m, []bundle.ToleranceOverride{{Output: "logits", Value: 1}})
	if err == nil || !strings.Contains(err.Error(), `"logits" is not an output`) || !strings.Contains(err.Error(), "y, ids") {
		t.Errorf("unknown output: %v", err)
	}
}
