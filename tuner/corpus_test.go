package tuner_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/internal/bundlegen"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/strategy"
	"github.com/tunefleet/tunefleet/tuner"
)

// corpusDir finds Debian's libonnx-testdata: unpacked by `make testdata`
// (TUNEFLEET_ONNX_TESTDATA) or installed system-wide.
func corpusDir(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping the ONNX corpus")
	}
	for _, d := range []string{os.Getenv("TUNEFLEET_ONNX_TESTDATA"), "/usr/share/libonnx-testdata/data"} {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "node")); err == nil {
			return d
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("CI is set but the ONNX test corpus is missing: run `make testdata`")
	}
	t.Skip("ONNX test corpus not found: run `make testdata`")
	return ""
}

// corpusModels is the curated set: real models with recorded inputs and
// outputs from ONNX's own test suite, nobody's here. It spans convolutions,
// pooling, normalisation, activations, matrix products, reductions, shape
// ops, integer and boolean tensors, and several inputs and outputs.
var corpusModels = []string{
	"pytorch-converted/test_Conv1d",
	"pytorch-converted/test_Conv1d_dilated",
	"pytorch-converted/test_Conv1d_groups",
	"pytorch-converted/test_Conv2d",
	"pytorch-converted/test_Conv2d_depthwise",
	"pytorch-converted/test_Conv2d_dilated",
	"pytorch-converted/test_Conv2d_groups",
	"pytorch-converted/test_Conv2d_strided",
	"pytorch-converted/test_Conv3d",
	"pytorch-converted/test_ConvTranspose2d",
	"pytorch-converted/test_MaxPool2d",
	"pytorch-converted/test_MaxPool3d_stride",
	"pytorch-converted/test_Linear_no_bias",
	"pytorch-converted/test_Embedding",
	"pytorch-converted/test_ELU",
	"pytorch-converted/test_LeakyReLU",
	"pytorch-converted/test_PixelShuffle",
	"pytorch-converted/test_ReflectionPad2d",
	"pytorch-converted/test_SELU",
	"pytorch-converted/test_Softmax",
	"pytorch-converted/test_LogSoftmax",
	"pytorch-converted/test_Softplus",
	"pytorch-converted/test_Tanh",
	"pytorch-converted/test_log_softmax_dim3",
	"pytorch-operator/test_operator_chunk",
	"pytorch-operator/test_operator_conv",
	"pytorch-operator/test_operator_maxpool",
	"pytorch-operator/test_operator_permute2",
	"pytorch-operator/test_operator_reduced_mean_keepdim",
	"pytorch-operator/test_operator_view",
	"simple/test_single_relu_model",
	"simple/test_sign_model",
	"simple/test_shrink",
	"simple/test_expand_shape_model1",
	"node/test_add_uint8",
	"node/test_cast_FLOAT_to_FLOAT16",
	"node/test_det_2d",
	"node/test_gemm_default_matrix_bias",
	"node/test_gru_defaults",
	"node/test_lstm_with_peepholes",
	"node/test_rnn_seq_length",
	"node/test_layer_normalization_2d_axis1",
	"node/test_instancenorm_example",
	"node/test_matmul_4d",
	"node/test_mod_int64_fmod",
	"node/test_nonzero_example",
	"node/test_not_2d",
	"node/test_onehot_with_axis",
	"node/test_quantizelinear",
	"node/test_dequantizelinear",
	"node/test_resize_upsample_scales_nearest",
	"node/test_where_example",
	"node/test_argmax_keepdims_random",
	"node/test_einsum_batch_matmul",
	"node/test_gather_elements_negative_indices",
	"node/test_hardmax_example",
	"node/test_cumsum_2d_axis_1",
	"node/test_split_equal_parts_2d",
	"node/test_tile",
	"node/test_lrn",
	"node/test_softmax_example_expanded",
}

func quickOptions(t *testing.T, strat string, cands string) tuner.Options {
	t.Helper()
	s, err := strategy.Parse(strat, 0)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := backend.ParseCandidates(cands)
	if err != nil {
		t.Fatal(err)
	}
	rule := backend.DefaultStopRule()
	rule.MinSamples, rule.MaxSamples, rule.MaxTime = 20, 200, 50*time.Millisecond
	return tuner.Options{
		Backends: backend.Registry{"ort": ort.New(ort.Options{})}, Strategy: s, Candidates: cs,
		StopRule: rule, BatchSizes: []int{1, 4},
	}
}

func TestCorpusModelsTuneCorrectly(t *testing.T) {
	needORT(t)
	root := corpusDir(t)
	models := corpusModels
	if os.Getenv("TUNEFLEET_CORPUS_ALL") != "" {
		// Exploration mode: every model in the corpus, to curate the list.
		models = nil
		for _, sub := range []string{"node", "pytorch-converted", "pytorch-operator", "simple"} {
			entries, _ := os.ReadDir(filepath.Join(root, sub))
			for _, e := range entries {
				models = append(models, sub+"/"+e.Name())
			}
		}
		sort.Strings(models)
	}
	if len(models) < 40 && os.Getenv("TUNEFLEET_CORPUS_ALL") == "" {
		t.Fatalf("the curated corpus has %d models, want at least 40", len(models))
	}
	opts := quickOptions(t, strategy.FirstWins, "ort:cpu:basic")
	for _, m := range models {
		t.Run(m, func(t *testing.T) {
			t.Parallel() // each engine lives in its own child process
			dir := t.TempDir()
			b, err := bundlegen.FromTestData(filepath.Join(root, m), filepath.Join(dir, "bundle"), "")
			if err != nil {
				t.Fatalf("import: %v", err)
			}
			for _, g := range b.Manifest.Graphs {
				r, err := tuner.TuneGraph(context.Background(), b, g.Name, filepath.Join(dir, "out"), opts)
				if err != nil {
					t.Fatal(err)
				}
				if !r.OK() {
					t.Fatalf("no winner: %s", r.Failure.Message)
				}
				if got := r.Results[0].CheckedAt; got != len(g.Samples) {
					t.Fatalf("checked %d samples, want %d", got, len(g.Samples))
				}
				if r.Winner.Engine == nil || !strings.HasSuffix(r.Winner.Engine.Path, ort.EngineFile) {
					t.Fatalf("winner has no engine: %+v", r.Winner)
				}
			}
		})
	}
}
