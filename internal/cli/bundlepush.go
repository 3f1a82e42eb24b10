package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/bundlestore"
	"github.com/tunefleet/tunefleet/fleet"
)

// newBundlePush is `producer bundle push BUNDLE`: the bundle into the
// store, once, so that a fleet file names it by key and a nightly's pod
// needs no shared volume.
func newBundlePush(svc *services) *cobra.Command {
	return &cobra.Command{
		Use:   "push BUNDLE",
		Short: "Store a bundle for fleet files to name (prints its key)",
		Long: "Check a bundle (a directory or .tar/.tar.gz/.tgz) whole and store it in --store: its files as\n" +
			"content-addressed blobs (those stored already are not sent again) and an index, under\n" +
			"bundles/MODEL/sha256-HEX.json (the key, printed on stdout) and bundles/MODEL/latest.json. A fleet\n" +
			"entry's bundle: may then be store:KEY, store:bundles/MODEL (the one pushed last), or\n" +
			"s3://BUCKET[/PREFIX]/KEY of the fleet's store.",
		Example: "  producer bundle push mlp-bundle --store s3://tuning?endpoint=http://minio:9000",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, cleanup, err := openBundle(args[0])
			defer cleanup()
			if err != nil {
				return err
			}
			store, err := svc.openStore(cmd.Context())
			if err != nil {
				return err
			}
			key, err := bundlestore.Push(cmd.Context(), store, b)
			if err != nil {
				return fmt.Errorf("push %s to %s: %w", args[0], svc.storeName(), err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), key)
			fmt.Fprintf(cmd.ErrOrStderr(), "in a fleet file: bundle: %s%s (or %s%s for the one pushed last)\n", bundlestore.StoreScheme, key, bundlestore.StoreScheme, strings.TrimSuffix(bundlestore.LatestKey(b.Manifest.Model), "/latest.json"))
			return nil
		},
	}
}

// storedBundles opens --store for reading when a fleet entry names a
// stored bundle; nil (and no store opened) otherwise.
func storedBundles(ctx context.Context, svc *services, es []fleet.Entry) (*fleet.StoredBundles, func(), error) {
	if !slices.ContainsFunc(es, func(e fleet.Entry) bool { return bundlestore.IsRef(e.Bundle) }) {
		return nil, func() {}, nil
	}
	store, err := svc.openStoreToRead(ctx)
	if err != nil {
		return nil, func() {}, err
	}
	return &fleet.StoredBundles{Store: store, URL: svc.store}, func() {}, nil
}
