package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/artifacts"

	"github.com/tunefleet/tunefleet/internal/clip"
)

// newStore is `producer store`: the artifact store itself.
func newStore(svc *services) *cobra.Command {
	st := &cobra.Command{Use: "store", Short: "Manage the artifact store itself", Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return usageErr(fmt.Errorf("unknown command %q for %q (see %s --help)", clip.Counted(args[0], clip.Echo), cmd.CommandPath(), cmd.CommandPath()))
		}}
	var format string
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Make the --store bucket (or directory) with the configured credentials; already there is fine",
		Long: "Make the store --store names: an S3 bucket in the URL's region, with the credentials every other command\n" +
			"uses (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, S3_ACCESS_KEY/S3_SECRET_KEY or the credentials file), or a\n" +
			"local directory. A store that is there already is left as it is (exit 0), so a deploy may run it every time.\n" +
			"Exit 2 for a bad URL, 3 when the server is unreachable or refuses the credentials.",
		Example: "  producer store init --store 's3://tuning?endpoint=http://127.0.0.1:7070&region=us-east-1'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !okFormat(&format, "text") {
				return usageErr(fmt.Errorf("-o %q: want text or json", clip.Counted(format, clip.Echo)))
			}
			s, made, err := artifacts.Init(cmd.Context(), svc.store)
			if err != nil {
				_, err = storeErr(nil, err)
				return err
			}
			if c, ok := s.(interface{ Close() error }); ok {
				defer c.Close()
			}
			if format == "json" {
				return writeJSON(cmd.OutOrStdout(), struct {
					Store   string `json:"store"`
					Created bool   `json:"created"`
				}{s.String(), made})
			}
			what := "was there already"
			if made {
				what = "created"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "store %s: %s\n", s, what)
			return nil
		},
	}
	initCmd.Flags().StringVarP(&format, "output", "o", "text", "output format: text (or table) or json")
	st.AddCommand(initCmd)
	return st
}
