package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/web"
)

func newServeWeb(svc *services) *cobra.Command {
	var (
		listen  string
		write   bool
		allowed []string
	)
	cmd := &cobra.Command{
		Use:   "serve [--listen 127.0.0.1:8080] [--write]",
		Short: "Serve the web UI: runs, run pages with charts, model history, the fleet matrix, queues, /metrics",
		Long: "Serve a web UI over --redis and --store: the runs (filtered, paged), each run's graphs and candidates with\n" +
			"charts, each model's history, a models × platforms matrix, asynqmon (read-only) under /monitor/, and\n" +
			"Prometheus metrics at /metrics (tunefleet_queue_tasks{queue,state}, tunefleet_runs{status}).\n" +
			"It is read-only unless --write, which adds a Cancel button to running runs (what `producer cancel` does).\n" +
			"An address off loopback needs credentials from the environment: $" + web.TokenEnv + " (a bearer token,\n" +
			"or the password of basic auth with any user) or $" + web.UserEnv + " and $" + web.PasswordEnv + " (basic auth);\n" +
			"without them it refuses to start. Set on loopback, they are required there too. A token must be at least\n" +
			"16 random-looking characters.\n" +
			"Requests must name this server in their Host header (DNS rebinding: another site's page cannot): a loopback\n" +
			"address or localhost always; the --listen host; names given with --allowed-hosts (what an ingress or a\n" +
			"reverse proxy passes). Listening on all addresses (0.0.0.0) with credentials and no --allowed-hosts, any Host.",
		Example: "  producer serve --redis redis://127.0.0.1:6379/0 --store file://demo-out/store\n" +
			"  TUNEFLEET_WEB_TOKEN=$(openssl rand -hex 16) producer serve --listen 0.0.0.0:8080 --write",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			auth, err := web.AuthFromEnv(os.Getenv)
			if err != nil {
				return usageErr(err)
			}
			if err := web.CheckListen(listen, auth); err != nil {
				return usageErr(err)
			}
			hosts, err := web.NewHosts(allowed, listen, auth)
			if err != nil {
				return usageErr(err)
			}
			if err := needRedis(svc, "serve"); err != nil {
				return err
			}
			ctx := cmd.Context()
			store, err := svc.openStoreToRead(ctx)
			if err != nil {
				return err
			}
			rdb, err := svc.openRedis(ctx)
			if err != nil {
				return err
			}
			defer rdb.Close()
			srv, err := web.New(web.Config{Redis: rdb, Store: store, Write: write, Auth: auth, Hosts: hosts, Log: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			defer srv.Close()
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return usageErr(fmt.Errorf("--listen %s: %w", listen, err))
			}
			mode := "read-only"
			if write {
				mode = "with --write (Cancel buttons)"
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "serving the web UI on http://%s/ (%s; store %s)\n", ln.Addr(), mode, store)
			return serveWebUntil(ctx, &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}, ln)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "address to listen on (off loopback it needs $"+web.TokenEnv+" or $"+web.UserEnv+"/$"+web.PasswordEnv+")")
	cmd.Flags().StringSliceVar(&allowed, "allowed-hosts", nil, "host names (or IPs) clients may use in the Host header besides loopback and the --listen host, comma-separated")
	cmd.Flags().BoolVar(&write, "write", false, "allow changes from the UI: a Cancel button on running runs")
	return cmd
}

// serveWebUntil serves until ctx ends (SIGINT/SIGTERM), then gives requests
// in flight a few seconds to finish.
func serveWebUntil(ctx context.Context, hs *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Within Execute's StopGrace, so requests in flight end as they
	// should rather than with the process.
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
