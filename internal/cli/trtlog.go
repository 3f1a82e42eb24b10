package cli

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/trt"
)

func newTRTLog() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "trt-log FILE",
		Short: "Show what tunefleet makes of a trtexec log: version, device, performance figures, warnings, status, failure class",
		Long: "Parse a trtexec log (stdout and stderr together, as a worker keeps it) and classify its outcome, for\n" +
			"people debugging a build. Exit 0 whenever the file parses: the verdict is in the output.",
		Example: "  worker trt-log build.log -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !okFormat(&format, "text") {
				return usageErr(fmt.Errorf("-o %q: want text or json", format))
			}
			r, err := trt.DescribeFile(args[0])
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				return usageErr(err) // the file named is the user's to fix
			}
			if err != nil {
				return failedErr(err)
			}
			if format == "json" {
				return r.WriteJSON(cmd.OutOrStdout())
			}
			return r.WriteText(cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVarP(&format, "output", "o", "text", "output format: text (or table) or json")
	return cmd
}
