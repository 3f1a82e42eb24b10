package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/gpu"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
)

// machine detects this machine's fingerprint: GPUs through NVML when a
// driver is there, else the CPU, with the runtime versions that make
// engines and timings comparable.
func machine(ctx context.Context, ortLib, trtexec, class string) (gpu.Fingerprint, error) {
	return detect(ctx, ortLib, trtexec, gpu.DetectOptions{Class: class})
}

// cpuMachine is this machine's CPU fingerprint, GPUs or not.
func cpuMachine(ctx context.Context, ortLib string) (gpu.Fingerprint, error) {
	return detect(ctx, ortLib, "", gpu.DetectOptions{CPUOnly: true})
}

func detect(ctx context.Context, ortLib, trtexec string, opts gpu.DetectOptions) (gpu.Fingerprint, error) {
	if class := opts.Class; class != "" {
		if err := jobs.CheckTarget(class); err != nil {
			return gpu.Fingerprint{}, usageErr(fmt.Errorf("--class: %w", err))
		}
	}
	if lib, err := ort.FindLibrary(ortLib); err == nil {
		opts.ORTVersion = ort.LibraryVersion(lib)
	}
	if !opts.CPUOnly {
		opts.TensorRTVersion, opts.TensorRTBuild = tensorRTVersion(ctx, trtexec)
	}
	return gpu.DetectDefault(ctx, opts)
}

func newInfo() *cobra.Command {
	var (
		format, class, ortLib string
		queues, trtexec       string
	)
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Print this machine's platform fingerprint and the queues a worker here would serve",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !okFormat(&format, "text") {
				return usageErr(fmt.Errorf("-o %q: want text or json", format))
			}
			fp, err := machine(cmd.Context(), ortLib, trtexec, class)
			if err != nil {
				return err
			}
			info := gpu.NewInfo(fp, splitList(queues))
			if fp.Kind == gpu.KindGPU {
				for i := range fp.GPUs {
					if r, err := gpu.Snapshot(cmd.Context(), gpu.DefaultLibrary(), i); err == nil {
						info.Telemetry = append(info.Telemetry, r)
					}
				}
			}
			if format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			fmt.Fprint(cmd.OutOrStdout(), info.Text())
			return nil
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "text", "output format: text (or table) or json")
	cmd.Flags().StringVar(&class, "class", "", "target class to serve (default: from the GPU name, or cpu)")
	cmd.Flags().StringVar(&queues, "queues", "", "queues to serve instead of the class's")
	cmd.Flags().StringVar(&trtexec, "trtexec", "", "trtexec executable (default: trtexec on PATH)")
	cmd.Flags().StringVar(&ortLib, "ort-lib", "", "ONNX Runtime library (default: $"+ort.LibraryEnv+" or the one make ort fetched)")
	return cmd
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
