package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/deployverify"
	"github.com/tunefleet/tunefleet/internal/clip"
	"github.com/tunefleet/tunefleet/provenance"
)

// newVerify is `producer verify DIR --key K`: a fetched directory checked
// with nothing else at hand (no store, no Redis).
func newVerify() *cobra.Command {
	var keyFiles []string
	var format string
	cmd := &cobra.Command{
		Use:   "verify DIR --key PUB.pem [-o text|json]",
		Short: "Verify a directory fetch laid out (tunefleet, Triton or AITune layout) against its signed provenance, with nothing else at hand",
		Long: "Check DIR, as `producer fetch --verify-key` laid it out, with only DIR and a verify key: DIR/" + deployverify.LayoutAttestationFile + ",\n" +
			"the run's attestation of that layout, must be signed by one of the keys (repeatable --key, for rotation), and every\n" +
			"file in DIR must be one of its subjects by its path there, with its sha256 (two models swapped, an edited config.pbtxt\n" +
			"fail), every subject present. A file nothing signed is refused, as is a missing one.\n" +
			"A directory fetched from a run signed before layouts were (no " + deployverify.LayoutAttestationFile + ") is checked as before, against\n" +
			"DIR/" + AttestationFile + ": DIR/state.json the state it names, engines by the digests the signed state gives them,\n" +
			"Triton's config.pbtxt and graphs.json regenerated from it byte for byte; a note on stderr says what it lacks.\n" +
			"Exit 0 when it verifies; 4 when a check fails (its message names it: key, signature, digest); 2 for a bad key or DIR.",
		Example: "  producer verify models/ --key tunefleet.pub",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(keyFiles) == 0 {
				return usageErr(fmt.Errorf("verify needs --key PUB.pem: a signature is only worth the key it is checked against"))
			}
			if !okFormat(&format, "text") {
				return usageErr(fmt.Errorf("-o %q: want text or json", clip.Counted(format, clip.Echo)))
			}
			var keys []*provenance.Verifier
			for _, p := range keyFiles {
				k, err := provenance.LoadVerifier(p)
				if err != nil {
					return usageErr(err)
				}
				keys = append(keys, k)
			}
			if err := checkDir(args[0]); err != nil {
				return usageErr(err)
			}
			r, err := deployverify.Dir(cmd.Context(), args[0], keys)
			if err != nil {
				if errors.Is(err, provenance.ErrRefused) {
					return verifyErr(err)
				}
				return err
			}
			if format == "json" {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: verified: %s layout of run %s, %d file(s), signed by key id %.16s…\n", r.Dir, r.Layout, r.Run, len(r.Files), r.KeyID)
			if r.Note != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "note: "+r.Note)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&keyFiles, "key", nil, "public key (PEM) the directory's provenance must be signed by (repeatable: any one of them)")
	cmd.Flags().StringVarP(&format, "output", "o", "text", "output format: text or json")
	return cmd
}

// checkDir says what is wrong with a directory to verify, if anything.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s does not exist: give the directory fetch laid out", clip.Counted(dir, clip.Echo))
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory: give the directory fetch laid out", clip.Counted(dir, clip.Echo))
	}
	return nil
}
