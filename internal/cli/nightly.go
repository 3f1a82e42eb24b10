package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newNightly is the parent of the nightly commands (`producer nightly
// report`; the fleet submission adds its own flags and siblings).
func newNightly(svc *services) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nightly",
		Short: "Nightly fleet tuning: the morning report",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return usageErr(fmt.Errorf("unknown command %q for %q (see %s --help)", args[0], cmd.CommandPath(), cmd.CommandPath()))
		},
	}
	cmd.AddCommand(newNightlyReport(svc))
	return cmd
}
