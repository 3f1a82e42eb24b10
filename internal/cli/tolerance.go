package cli

import (
	"github.com/spf13/pflag"

	"github.com/tunefleet/tunefleet/bundle"
)

// toleranceFlags are --atol and --rtol, shared by `producer bundle
// from-onnx` (written into the bundle), `worker tune` and `producer submit`
// (applied over the bundle's own, for this tuning only).
type toleranceFlags struct {
	atol, rtol []string
}

func (f *toleranceFlags) register(fl *pflag.FlagSet) {
	fl.StringArrayVar(&f.atol, "atol", nil, "absolute tolerance of the correctness check, [OUTPUT=]VALUE: one output, or every float output without OUTPUT= (repeatable)")
	fl.StringArrayVar(&f.rtol, "rtol", nil, "relative tolerance of the correctness check, [OUTPUT=]VALUE (repeatable); |got-want| ≤ atol + rtol·|want|")
}

// parse reads the flags; its errors are the user's.
func (f *toleranceFlags) parse() ([]bundle.ToleranceOverride, error) {
	var out []bundle.ToleranceOverride
	for _, set := range []struct {
		vals []string
		rtol bool
	}{{f.atol, false}, {f.rtol, true}} {
		for _, v := range set.vals {
			o, err := bundle.ParseToleranceOverride(v, set.rtol)
			if err != nil {
				return nil, usageErr(err)
			}
			out = append(out, o)
		}
	}
	return out, nil
}
