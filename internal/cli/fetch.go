package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/deployverify"
	"github.com/tunefleet/tunefleet/internal/clip"
	"github.com/tunefleet/tunefleet/provenance"
	"github.com/tunefleet/tunefleet/state"
	"github.com/tunefleet/tunefleet/triton"
)

func newFetch(svc *services) *cobra.Command {
	var platform, run, out, layout, format string
	var vf verifyFlags
	var tf targetFlags
	cmd := &cobra.Command{
		Use:   "fetch MODEL --platform P [--run ID] [--format tunefleet|aitune|triton] [--verify-key PUB.pem] [--for-platform KEY | --for-this-machine | --portable] --out DIR [-o text|json]",
		Short: "Download a model's newest good state and its engines, verifying every checksum (and signature)",
		Long: "Resolve models/<MODEL>/<P>/latest.json (or the given run), download state.json and every engine it names\n" +
			"into DIR (DIR/state.json, DIR/engines/<graph>/<file>), and verify every sha256. Needs only --store.\n" +
			"DIR must be new or an empty directory; it appears whole, or not at all. -o json prints what was laid out as JSON.\n" +
			"With --format aitune, lay out the run's AITune checkpoint instead, for\n" +
			"ait.load(module, NAME, storage=LocalTorchStorage(base_folder=DIR)) (from aitune.torch import LocalTorchStorage),\n" +
			"where NAME is the checkpoint's name: the aitune block's \"name\", which defaults to the bundle's model.\n" +
			"Fetch prints it, and warns of graphs whose winner ran on a provider AITune's backend cannot use\n" +
			"(ort:cpu:*: AITune's ONNXRuntimeBackend runs on CUDA only, so they deploy on a provider never measured).\n" +
			"With --format triton, lay out a Triton Inference Server model repository: one model per graph spec\n" +
			"(DIR/<model>_<graph>/config.pbtxt and 1/model.onnx or 1/model.plan) and DIR/graphs.json mapping graph specs\n" +
			"to Triton models (docs/deploy-tooling.md).\n" +
			"With --verify-key PUB.pem (repeatable), the run's signed provenance (runs/<run>/attestation.intoto.jsonl)\n" +
			"must verify with one of the keys and name the state, every engine and every checkpoint file fetched;\n" +
			"otherwise fetch writes nothing and exits 4. The envelope is laid out as DIR/" + AttestationFile + ".\n" +
			"Without --run, it resolves through the signed latest pointer (models/<MODEL>/<P>/latest.intoto.jsonl), refusing\n" +
			"a rollback (latest.json moved without a signature; a sequence below --min-sequence or the highest seen, in --seen)\n" +
			"and a pointer older than --max-age.\n" +
			"With --for-platform KEY, --for-this-machine or --for-cpuinfo FILE, fetch refuses, writing nothing, a state whose\n" +
			"engines that machine cannot run (a graph's requires in state.json: ONNX Runtime's NCHWc layout padded for\n" +
			"another CPU's block, a TensorRT plan of another compute capability or TensorRT release); --portable refuses\n" +
			"any engine tied to the hardware that built it.\n" +
			"Exit 2 when the model, platform or run is not in the store; 1 when its run did not succeed, or the target cannot run it;\n" +
			"4 when a check refuses what would be deployed: its provenance (key, signature) or a file's digest.",
		Example: "  producer fetch demo_mlp --platform cpu --out deploy/demo_mlp\n" +
			"  producer fetch demo_model --platform cpu --format triton --verify-key tunefleet.pub --out models/",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := required(map[string]bool{"--platform P": platform == "", "--out DIR": out == ""}); err != nil {
				return err
			}
			if layout != "tunefleet" && layout != "aitune" && layout != "triton" {
				return usageErr(fmt.Errorf("--format %q: want tunefleet, aitune or triton", clip.Counted(layout, clip.Echo)))
			}
			if !okFormat(&format, "text") {
				return usageErr(fmt.Errorf("-o %q: want text or json", clip.Counted(format, clip.Echo)))
			}
			keys, err := vf.load()
			if err != nil {
				return err
			}
			target, forTarget, err := tf.machine()
			if err != nil {
				return err
			}
			store, err := svc.openStoreToRead(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			check := checkSigned(cmd.Context(), store, keys, layout == "aitune")
			// A verifying fetch checks what it laid out against the run's
			// attestation of that layout, and lays that out beside it.
			var seal *layoutSeal
			if check != nil {
				seal = &layoutSeal{layout: layout, out: out, keys: keys}
				check = seal.check(cmd.Context(), store, check)
			}
			if forTarget {
				// After the signature: a state that does not verify is
				// refused as such, whatever it would run on.
				signed := check
				check = func(st *state.State, data []byte) (map[string][]byte, error) {
					var extra map[string][]byte
					if signed != nil {
						if extra, err = signed(st, data); err != nil {
							return nil, err
						}
					}
					return extra, tf.canRun(st, target)
				}
			}
			// A verifying fetch of the newest state goes through the signed
			// latest pointer, checked for rollback and age.
			var latest *state.Latest
			var ptr *provenance.Pointer
			if len(keys) > 0 && run == "" {
				if latest, ptr, err = vf.resolveLatest(cmd.Context(), store, keys, args[0], platform); err != nil {
					return fetchErr(err)
				}
			}
			defer func() {
				if ptr != nil && cmd.Context().Err() == nil {
					vf.remember(ptr, cmd.ErrOrStderr())
				}
			}()
			if layout == "aitune" {
				cp, err := artifacts.FetchCheckpointWith(cmd.Context(), store, args[0], platform, run, out, artifacts.FetchOptions{Check: check, Seal: seal.sealer(cmd.Context()), Latest: latest})
				if err := fetchErr(err); err != nil {
					ptr = nil
					return err
				}
				if format == "json" {
					return writeJSON(w, struct {
						Dir string `json:"dir"`
						*state.Checkpoint
					}{out, cp})
				}
				fmt.Fprintf(w, "AITune checkpoint %q in %s (%d files): ait.load(module, %q, storage=LocalTorchStorage(base_folder=%q))\n",
					cp.Name, out, len(cp.Files), cp.Name, out)
				for _, u := range cp.Unmeasured {
					fmt.Fprintf(w, "warning: graph %s won as %s, but AITune runs it on %s, which was never measured\n", u.Graph, u.Candidate, u.DeploysOn)
				}
				printVerified(cmd, keys, out, ptr, seal)
				return nil
			}
			opts := artifacts.FetchOptions{Check: check, Seal: seal.sealer(cmd.Context()), Latest: latest}
			var repo *triton.Repository
			if layout == "triton" {
				opts.Layout = func(st *state.State, stage string) error {
					r, err := triton.Layout(st, stage)
					repo = r
					return err
				}
			}
			ctx, done := withTransferBar(cmd, "fetch "+args[0])
			got, err := artifacts.FetchWith(ctx, store, args[0], platform, run, out, opts)
			done()
			if err := fetchErr(err); err != nil {
				ptr = nil
				return err
			}
			if format == "json" {
				if repo != nil {
					return writeJSON(w, struct {
						*artifacts.Fetched
						Triton *triton.Repository `json:"triton"`
					}{got, repo})
				}
				return writeJSON(w, got)
			}
			if repo != nil {
				fmt.Fprintf(w, "run %s: Triton model repository %s (%d models; graph specs → models in %s)\n", got.Run, out, len(repo.Models), filepath.Join(out, triton.MapFile))
				for _, g := range repo.Map.Graphs {
					fmt.Fprintf(w, "  graph %s: %s (%s, max_batch_size %d)\n", g.Graph, g.TritonModel, g.Config.Platform, g.Config.MaxBatchSize)
				}
				printRequires(w, got.Requires, forTarget)
				printVerified(cmd, keys, out, ptr, seal)
				return nil
			}
			fmt.Fprintf(w, "run %s: %s\n", got.Run, got.State)
			for g, p := range got.Engines {
				fmt.Fprintf(w, "  graph %s: %s\n", g, p)
			}
			printRequires(w, got.Requires, forTarget)
			printVerified(cmd, keys, out, ptr, seal)
			return nil
		},
	}
	cmd.Flags().StringVar(&platform, "platform", "", "platform (the target class the model was tuned for, e.g. cpu)")
	cmd.Flags().StringVar(&run, "run", "", "a specific run instead of the latest good one")
	cmd.Flags().StringVar(&layout, "format", "tunefleet", "what to lay out: tunefleet (state.json + engines), aitune (the AITune checkpoint) or triton (a Triton model repository)")
	cmd.Flags().StringVar(&out, "out", "", "directory to lay the state out in (must not exist or be empty)")
	cmd.Flags().StringVarP(&format, "output", "o", "text", "output format: text (or table) or json")
	vf.register(cmd.Flags())
	tf.register(cmd.Flags())
	return cmd
}

// printVerified says that the fetch checked a signature.
func printVerified(cmd *cobra.Command, keys []*provenance.Verifier, out string, ptr *provenance.Pointer, seal *layoutSeal) {
	if len(keys) > 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "signed provenance verified; its envelope is %s\n", filepath.Join(out, AttestationFile))
	}
	switch {
	case seal == nil:
	case seal.Missing:
		fmt.Fprintf(cmd.ErrOrStderr(), "note: run %s has no signed attestation of the %s layout (it was signed before finalize signed each layout): %s names no file by its path in %s; producer verify checks the directory against the run's own %s instead, and cosign can check only state.json and the engines\n",
			seal.run, seal.layout, deployverify.LayoutAttestationFile, out, AttestationFile)
	default:
		fmt.Fprintf(cmd.OutOrStdout(), "every file verified by its path in the signed %s layout; the attestation is %s\n", seal.layout, filepath.Join(out, deployverify.LayoutAttestationFile))
	}
	if ptr != nil {
		fmt.Fprintf(cmd.OutOrStdout(), "signed latest pointer verified: sequence %d, moved %s\n", ptr.Sequence, ptr.MovedAt.UTC().Format(time.RFC3339))
	}
}

// fetchErr gives a fetch's error its exit code: a model, platform or run
// the store does not have is not found (bad input, 2, as in history and
// status); a run that exists but did not succeed and a graph Triton cannot
// serve and an engine the deploy target cannot run are "not good" (1);
// provenance that does not verify and bytes that are not the ones the
// state names fail verification (4).
func fetchErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, artifacts.ErrBadDestination), errors.Is(err, artifacts.ErrMissingEngineData), errors.Is(err, artifacts.ErrNotExist):
		return usageErr(err)
	case errors.Is(err, provenance.ErrRefused), errors.Is(err, artifacts.ErrCorrupt):
		return verifyErr(err)
	case errors.Is(err, artifacts.ErrNotFetchable), errors.Is(err, triton.ErrUnservable), errors.As(err, new(*cannotRunError)):
		return failedErr(err)
	}
	return err
}

// required names the flags that are missing (true in missing), and only
// those: nil when none is.
func required(missing map[string]bool) error {
	var names []string
	for name, m := range missing {
		if m {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	switch len(names) {
	case 0:
		return nil
	case 1:
		return usageErr(fmt.Errorf("%s is required", names[0]))
	}
	return usageErr(fmt.Errorf("%s are required", strings.Join(names, " and ")))
}
