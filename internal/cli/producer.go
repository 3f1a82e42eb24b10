package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tunefleet/tunefleet/aitune"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/shapes"
)

// ProducerHealthURL is what `producer healthcheck` probes by default: the
// web UI's /healthz on the port the producer image serves it.
const ProducerHealthURL = "http://127.0.0.1:8080/healthz"

// NewProducer returns the producer command tree.
func NewProducer() *cobra.Command {
	root := &cobra.Command{
		Use:   "producer",
		Short: "Make recording bundles and submit them for tuning",
		Long: "producer makes recording bundles (an ONNX graph per graph spec, recorded input samples and\n" +
			"reference outputs) and submits them to the tuning fleet.",
	}
	svc := &services{name: "tunefleet-producer"}
	svc.register(root, "none: submit runs embedded, in this process")
	svc.registerSignKey(root.PersistentFlags())
	(&progressFlags{}).register(root)
	b := &cobra.Command{Use: "bundle", Short: "Make and check recording bundles", Args: cobra.ArbitraryArgs,
		// Without a RunE cobra would print help and exit 0 for a mistyped
		// subcommand ("bundle valdiate"), and a script would go on.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return usageErr(fmt.Errorf("unknown command %q for %q (see %s --help)", args[0], cmd.CommandPath(), cmd.CommandPath()))
		}}
	b.AddCommand(newFromONNX(), newFromTestData(), newValidate(), newBundleCheck(), newMerge(), newBundlePush(svc))
	root.AddCommand(b, newSubmit(svc), newStatus(svc), newRuns(svc), newCompare(svc), newFetch(svc), newVerify(), newCancel(svc), newReconcile(svc),
		newGC(svc), newHistory(svc), newFleet(svc), newStore(svc), newNightly(svc), newServeWeb(svc), newHealthcheck(ProducerHealthURL))
	return root
}

// fromONNXFlags are `producer bundle from-onnx`'s flags; options turns
// them into bundlegen's options.
type fromONNXFlags struct {
	o         bundlegen.ONNXOptions
	out       string
	ints      string
	ortLib    string
	batchAxes []string
	values    []string
	tol       toleranceFlags
}

func (f *fromONNXFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.out, "out", "", "directory to write the bundle to (must not exist)")
	fl.StringArrayVar(&f.o.Ranges, "shape", nil, "input shape range NAME:MIN..MAX, e.g. input:1x64..32x64 (repeatable)")
	fl.IntVar(&f.o.Samples, "samples", 2, "number of recorded samples (sample 0 has the max shape, the last the min)")
	fl.Uint64Var(&f.o.Seed, "seed", 1, "seed of the random inputs")
	fl.StringVar(&f.o.Model, "model", "", "model name (default: the file name)")
	fl.StringVar(&f.ints, "int-range", "0..9", "inclusive range of random integer inputs, LO..HI")
	fl.StringVar(&f.ortLib, "ort-lib", "", "ONNX Runtime library (default: $"+ort.LibraryEnv+" or the one make ort fetched)")
	fl.StringArrayVar(&f.batchAxes, "batch-axis", nil, "INPUT:AXIS, the batch axis of an input whose dim names do not say it (default: the axis named batch, N, batch_size, …, else a varying axis 0) (repeatable)")
	fl.StringSliceVar(&f.o.Outputs, "outputs", nil, "keep only these outputs, e.g. --outputs logits,boxes: the graph is pruned to what they need, and only they are recorded (default: every output)")
	fl.BoolVar(&f.o.DynamicBatch, "dynamic-batch", false, "turn axis 0 of inputs and outputs fixed at 1 into a dynamic batch, once running batch 2 against two batch-1 runs has shown the graph batch-agnostic (refused otherwise); such inputs without --shape get batch 1..8")
	fl.StringArrayVar(&f.values, "value", nil, "INPUT=VALUE: fill an input with VALUE in every sample instead of random values, e.g. sr=16000 (repeatable)")
	f.tol.register(fl)
}

// options checks the flags; its errors are the user's.
func (f *fromONNXFlags) options() (bundlegen.ONNXOptions, error) {
	o := f.o
	if f.out == "" {
		return o, usageErr(fmt.Errorf("--out DIR is required"))
	}
	lo, hi, err := parseIntRange(f.ints)
	if err != nil {
		return o, usageErr(err)
	}
	o.IntLo, o.IntHi = lo, hi
	if o.BatchAxes, err = parseBatchAxes(f.batchAxes); err != nil {
		return o, err
	}
	if o.Tolerances, err = f.tol.parse(); err != nil {
		return o, err
	}
	if o.Values, err = parseValues(f.values); err != nil {
		return o, err
	}
	return o, nil
}

func newFromONNX() *cobra.Command {
	var f fromONNXFlags
	cmd := &cobra.Command{
		Use:   "from-onnx MODEL.onnx --out DIR",
		Short: "Make a bundle from an ONNX file: random inputs, reference outputs from ONNX Runtime",
		Long: "Make a one-graph bundle from an ONNX file. Inputs with dynamic dims need --shape NAME:MIN..MAX\n" +
			"(shapes written 1x3x224x224). Samples are random (floats in [-1,1), integers in --int-range)\n" +
			"from a fixed --seed; reference outputs come from ONNX Runtime with all graph optimizations off.\n" +
			"An input's batch axis is the one whose ONNX dim name is batch, N, batch_size, …, else a varying axis 0;\n" +
			"--batch-axis INPUT:AXIS says it where the names do not (a state [2,?,64] has it at 1). --atol/--rtol\n" +
			"write the correctness check's tolerances into the bundle.",
		Example: "  producer bundle from-onnx mlp.onnx --shape input:1x64..32x64 --samples 3 --out mlp-bundle",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runFromONNX(cmd, args[0], &f)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

func runFromONNX(cmd *cobra.Command, model string, f *fromONNXFlags) error {
	o, err := f.options()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "tunefleet-reference-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	o.WorkDir = work
	o.Reference = ort.New(ort.Options{Library: f.ortLib})
	b, err := bundlegen.FromONNX(cmd.Context(), model, f.out, o)
	if err != nil {
		if backend.ClassOf(err, "") == backend.FailInfrastructure {
			return err // the machine, e.g. no ONNX Runtime library: ExitInternal
		}
		return usageErr(err)
	}
	return printBundle(cmd, b, "text")
}

func parseBatchAxes(flags []string) (map[string]int, error) {
	out := map[string]int{}
	for _, s := range flags {
		name, ax, err := shapes.ParseBatchAxis(s)
		if err != nil {
			return nil, usageErr(err)
		}
		if _, dup := out[name]; dup {
			return nil, usageErr(fmt.Errorf("--batch-axis %s is given twice", name))
		}
		out[name] = ax
	}
	return out, nil
}

func parseIntRange(s string) (int64, int64, error) {
	a, b, ok := strings.Cut(s, "..")
	lo, err1 := strconv.ParseInt(a, 10, 64)
	hi, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || lo > hi {
		return 0, 0, fmt.Errorf("--int-range %q: want LO..HI with LO ≤ HI, e.g. 0..9", s)
	}
	return lo, hi, nil
}

func newFromTestData() *cobra.Command {
	var out, model string
	cmd := &cobra.Command{
		Use:     "from-testdata DIR --out DIR",
		Short:   "Make a bundle from a model folder in the ONNX test-data layout (model.onnx + test_data_set_*/)",
		Example: "  producer bundle from-testdata /usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d --out conv2d-bundle",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageErr(fmt.Errorf("--out DIR is required"))
			}
			b, err := bundlegen.FromTestData(args[0], out, model)
			if err != nil {
				return usageErr(err)
			}
			return printBundle(cmd, b, "text")
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory to write the bundle to (must not exist)")
	cmd.Flags().StringVar(&model, "model", "", "model name (default: the folder name)")
	return cmd
}

func newValidate() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "validate DIR",
		Short: "Check a bundle whole and print its graphs and digest",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !okFormat(&format, "text") {
				return usageErr(fmt.Errorf("-o %q: want text or json", format))
			}
			b, cleanup, err := openBundle(args[0])
			defer cleanup()
			if err != nil {
				return err
			}
			// An archive is unpacked to a scratch directory that is gone
			// when this returns: name what the user gave (b.Dir stays the
			// scratch copy, which printBundle digests).
			return printBundleAs(cmd, b, args[0], format)
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "text", "output format: text (or table) or json")
	return cmd
}

type bundleSummary struct {
	Dir    string         `json:"dir"`
	Model  string         `json:"model"`
	Digest string         `json:"digest"`
	Graphs []graphSummary `json:"graphs"`
}

type graphSummary struct {
	Name    string   `json:"name"`
	Inputs  []string `json:"inputs"`
	Outputs []string `json:"outputs"`
	Samples int      `json:"samples"`
}

func describe(d bundle.TensorDecl) string {
	parts := make([]string, len(d.Shape))
	for i, a := range d.Shape {
		if a.IsStatic() {
			parts[i] = a.String()
		} else {
			parts[i] = fmt.Sprintf("%s=%d..%d", a.Label, d.Min[i], d.Max[i])
		}
	}
	return fmt.Sprintf("%s %s[%s]", d.Name, d.DType, strings.Join(parts, ","))
}

func printBundle(cmd *cobra.Command, b *bundle.Bundle, format string) error {
	return printBundleAs(cmd, b, b.Dir, format)
}

// printBundleAs prints b's summary under the name the user gave it (an
// archive's path rather than the directory it was unpacked to).
func printBundleAs(cmd *cobra.Command, b *bundle.Bundle, name, format string) error {
	digest, err := b.Digest()
	if err != nil {
		return err
	}
	s := bundleSummary{Dir: name, Model: b.Manifest.Model, Digest: digest}
	for _, g := range b.Manifest.Graphs {
		gs := graphSummary{Name: g.Name, Samples: len(g.Samples)}
		for _, d := range g.Inputs {
			gs.Inputs = append(gs.Inputs, describe(d))
		}
		for _, d := range g.Outputs {
			gs.Outputs = append(gs.Outputs, describe(d))
		}
		s.Graphs = append(s.Graphs, gs)
	}
	w := cmd.OutOrStdout()
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	fmt.Fprintf(w, "bundle %s: model %s, %d graph(s), digest %s\n", s.Dir, s.Model, len(s.Graphs), s.Digest)
	for _, g := range s.Graphs {
		fmt.Fprintf(w, "  graph %s: %d sample(s)\n    in:  %s\n    out: %s\n", g.Name, g.Samples, strings.Join(g.Inputs, "; "), strings.Join(g.Outputs, "; "))
	}
	return nil
}

func newMerge() *cobra.Command {
	var out, model string
	cmd := &cobra.Command{
		Use:     "merge BUNDLE... --out DIR",
		Short:   "Combine bundles into one with several graph specs (renamed 0, 1, …)",
		Example: "  producer bundle merge mlp-bundle convnet-bundle --out model-bundle",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageErr(fmt.Errorf("--out DIR is required"))
			}
			b, err := bundlegen.Merge(args, out, model)
			if err != nil {
				return usageErr(err)
			}
			return printBundle(cmd, b, "text")
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory to write the bundle to (must not exist)")
	cmd.Flags().StringVar(&model, "model", "", "model name (default: the first bundle's)")
	return cmd
}

// openBundle opens and validates a bundle directory or archive (.tar,
// .tar.gz, .tgz), its aitune block included: a malformed block is reported
// now, not when finalize would need it. cleanup removes an unpacked
// archive; call it when the command is done with the bundle.
func openBundle(path string) (b *bundle.Bundle, cleanup func(), err error) {
	cleanup = func() {}
	if bundle.IsArchive(path) {
		b, cleanup, err = bundle.OpenArchive(path, "")
	} else {
		b, err = bundle.Open(path)
	}
	if err != nil {
		return nil, cleanup, usageErr(err)
	}
	if _, err := aitune.ParseBlock(b.Manifest.AITune, b.Manifest); err != nil {
		cleanup()
		return nil, func() {}, usageErr(fmt.Errorf("bundle %s: %w", path, err))
	}
	return b, cleanup, nil
}

// parseValues reads --value INPUT=VALUE flags.
func parseValues(flags []string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, s := range flags {
		i := strings.LastIndex(s, "=")
		if i <= 0 {
			return nil, usageErr(fmt.Errorf("--value %q: want INPUT=VALUE, e.g. sr=16000", s))
		}
		v, err := strconv.ParseFloat(s[i+1:], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, usageErr(fmt.Errorf("--value %q: %q is not a finite number", s, s[i+1:]))
		}
		if _, dup := out[s[:i]]; dup {
			return nil, usageErr(fmt.Errorf("--value %s is given twice", s[:i]))
		}
		out[s[:i]] = v
	}
	return out, nil
}
