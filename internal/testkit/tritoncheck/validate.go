package tritoncheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// backendOfPlatform is Triton core's GetBackendTypeFromPlatform for the
// platforms a tunefleet repository uses.
var backendOfPlatform = map[string]string{
	"tensorrt_plan":    "tensorrt",
	"onnxruntime_onnx": "onnxruntime",
}

// Validate applies the load-time rules of Triton core (model_config_utils.cc)
// and of the backend the config names to a parsed config; engineProfiles
// is how many optimization profiles the TensorRT engine has (0 for ONNX).
// Every broken rule is reported, with Triton's own wording where it has one.
func Validate(m protoreflect.Message, engineProfiles int) error {
	x := msg{m}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	name, platform, backend := x.str("name"), x.str("platform"), x.str("backend")
	if name == "" {
		bad("model configuration must specify 'name'")
	}
	// ValidateModelConfig: a backend unless ensemble, and a matching pair.
	if backend == "" && platform != "ensemble" {
		bad("unexpected platform type '%s' for %s", platform, name)
	}
	if want, ok := backendOfPlatform[platform]; !ok || want != backend {
		bad("unexpected 'platform' and 'backend' pair, got:%s, %s", platform, backend)
	}
	maxBatch := x.int("max_batch_size")
	if maxBatch < 0 {
		bad("'max_batch_size' must be non-negative value for %s", name)
	}
	if !x.has("version_policy") {
		bad("must specify 'version policy' for %s", name)
	}
	if x.has("dynamic_batching") {
		for _, size := range x.sub("dynamic_batching").ints("preferred_batch_size") {
			if size <= 0 {
				bad("dynamic batching preferred size must be positive for %s", name)
			}
			if size > maxBatch {
				bad("dynamic batching preferred size must be <= max batch size for %s", name)
			}
		}
		if maxBatch == 0 {
			// Triton ignores the batcher of a non-batching model; a
			// repository that asks for one says something it does not do.
			bad("dynamic_batching on a model with max_batch_size 0 (%s)", name)
		}
	}
	// ValidateModelInput / ValidateModelOutput → ValidateIOShape.
	for _, field := range []string{"input", "output"} {
		seen := map[string]bool{}
		for _, io := range x.msgs(field) {
			errs = append(errs, validateIO(io, maxBatch, platform, "model "+field+" ")...)
			if seen[io.str("name")] {
				bad("model %s '%s' is declared twice for %s", field, io.str("name"), name)
			}
			seen[io.str("name")] = true
		}
		if len(seen) == 0 {
			bad("model %s must declare at least one %s for %s", field, field, name)
		}
	}
	// ValidateInstanceGroup (after normalization, which a tunefleet config
	// needs none of: every group is explicit).
	groups := x.msgs("instance_group")
	if len(groups) == 0 {
		bad("must specify one or more 'instance group's for %s", name)
	}
	for _, g := range groups {
		kind := g.enum("kind")
		gpus := g.ints("gpus")
		switch kind {
		case "KIND_CPU", "KIND_MODEL":
			if len(gpus) > 0 {
				bad("instance group of model %s has kind %s but specifies one or more GPUs", name, kind)
			}
		case "KIND_GPU":
		default:
			bad("instance group of model %s has unexpected kind %s", name, kind)
		}
		if g.int("count") < 1 {
			bad("instance group of model %s has count %d (want at least 1)", name, g.int("count"))
		}
		profiles := g.strs("profile")
		if platform != "tensorrt_plan" && len(profiles) > 0 {
			bad("instance group of model %s and platform %s specifies profile field which is only supported for TensorRT models", name, platform)
		}
		if platform == "tensorrt_plan" && kind != "KIND_GPU" {
			bad("instance group of TensorRT model %s has kind %s (TensorRT runs on GPUs only)", name, kind)
		}
		for _, p := range profiles {
			i, err := strconv.Atoi(p)
			switch {
			case p == "":
				bad("profile name must not be empty")
			case err != nil:
				bad("unable to parse '%s': %v", p, err)
			case i < 0:
				bad("instance group of model %s specifies invalid profile %s. The field should contain the string representation of a non-negative integer.", name, p)
			case i >= engineProfiles:
				// The TensorRT backend: a profile the engine does not have.
				bad("instance group of model %s specifies profile %s, but the engine has %d profile(s)", name, p, engineProfiles)
			}
		}
	}
	if platform == "onnxruntime_onnx" && x.has("optimization") && x.sub("optimization").has("graph") {
		// onnxruntime_backend reads -1 basic, 1 extended, 2 disabled, else all.
		if l := x.sub("optimization").sub("graph").int("level"); l < -1 || l > 2 {
			bad("optimization.graph.level %d of %s is none of ONNX Runtime's (-1, 0, 1, 2)", l, name)
		}
	}
	return errors.Join(errs...)
}

// validateIO is Triton core's ValidateIOShape plus the platform rules of
// ValidateModelInput/Output.
func validateIO(io msg, maxBatch int64, platform, prefix string) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	name := io.str("name")
	if name == "" {
		bad("%smust specify 'name'", prefix)
		return errs
	}
	p := prefix + "'" + name + "' "
	dt := io.enum("data_type")
	if dt == "TYPE_INVALID" {
		bad("%smust specify 'data_type'", p)
	}
	if dt == "TYPE_STRING" && platform == "tensorrt_plan" {
		bad("%sdata type TYPE_STRING is not supported by TensorRT", p)
	}
	dims := io.ints("dims")
	if len(dims) == 0 {
		bad("%smust specify 'dims'", p)
	}
	for _, d := range dims {
		if d < 1 && d != -1 {
			bad("%sdimension must be integer >= 1, or -1 to indicate a variable-size dimension", p)
		}
	}
	if io.has("reshape") {
		shape := io.sub("reshape").ints("shape")
		if len(shape) == 0 && maxBatch == 0 {
			bad("%scannot have empty reshape for non-batching model as scalar tensors are not supported", p)
		}
		for _, d := range shape {
			if d < 1 && d != -1 {
				bad("%sreshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension", p)
			}
		}
		if dn, rn := count(dims), count(shape); dn != rn && (len(shape) != 0 || dn != 1) {
			bad("%shas different size for dims and reshape", p)
		}
	}
	if io.has("is_shape_tensor") && io.m.Get(io.f("is_shape_tensor")).Bool() && platform != "tensorrt_plan" {
		bad("shape tensors are only supported for TensorRT platform")
	}
	return errs
}

// count is the element count of dims; -1 if any is variable.
func count(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		if d == -1 {
			return -1
		}
		n *= d
	}
	return n
}

// Repository parses and validates every model of a Triton model
// repository: its config.pbtxt strictly, Triton's load rules, and that its
// version directory holds the default model file. engineProfiles is the
// TensorRT engines' profile count. It returns the summaries by model name.
func Repository(tb testing.TB, dir string, engineProfiles int) map[string]Config {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]Config{}
	for _, e := range entries {
		if !e.IsDir() {
			continue // Triton loads only the repository's directories
		}
		text, err := os.ReadFile(filepath.Join(dir, e.Name(), "config.pbtxt"))
		if err != nil {
			tb.Fatalf("model %s: %v", e.Name(), err)
		}
		m, err := Parse(tb, text)
		if err != nil {
			tb.Fatalf("model %s: config.pbtxt does not parse as Triton's inference.ModelConfig: %v\n%s", e.Name(), err, text)
		}
		if err := Validate(m, engineProfiles); err != nil {
			tb.Errorf("model %s: Triton would refuse its config.pbtxt:\n%v\n%s", e.Name(), err, text)
		}
		c := Summary(m)
		if c.Name != e.Name() {
			tb.Errorf("model directory %s holds a config named %q (Triton wants them equal)", e.Name(), c.Name)
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "1", c.File)); err != nil {
			tb.Errorf("model %s: version 1 has no %s: %v", e.Name(), c.File, err)
		}
		out[e.Name()] = c
	}
	return out
}
