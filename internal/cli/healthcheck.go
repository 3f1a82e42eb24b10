package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// healthcheckTimeout bounds one probe: a container runtime's HEALTHCHECK
// kills a probe at its own timeout and counts it as failed, and a probe
// that says why (timed out) is easier to read in `docker inspect`.
const healthcheckTimeout = 5 * time.Second

// newHealthcheck is `healthcheck [URL]`: GET a /healthz and exit 0 on 200,
// 1 otherwise with the answer's first line. The images are Debian slim and
// NVIDIA bases without curl or wget; a Dockerfile HEALTHCHECK and a compose
// healthcheck call the binary itself instead of installing a client.
func newHealthcheck(defaultURL string) *cobra.Command {
	return &cobra.Command{
		Use:   "healthcheck [URL]",
		Short: "Probe a /healthz (default " + defaultURL + "): exit 0 when it answers 200, 1 otherwise",
		Long: "GET URL (default " + defaultURL + ") once, for a container HEALTHCHECK. Exit status 0 when it answers\n" +
			"200, 1 with the reason when it answers anything else or nothing within 5 s, 2 for a URL that is not http(s).",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target := defaultURL
			if len(args) == 1 {
				target = args[0]
			}
			if u, err := url.Parse(target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usageErr(fmt.Errorf("healthcheck: %q is not an http(s) URL (e.g. %s)", target, defaultURL))
			}
			return probe(cmd.Context(), target, cmd.OutOrStdout())
		},
	}
}

// probe GETs target once and reports its status.
func probe(ctx context.Context, target string, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return usageErr(fmt.Errorf("healthcheck: %w", err))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return failedErr(fmt.Errorf("healthcheck %s: %w", target, err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	if resp.StatusCode != http.StatusOK {
		return failedErr(fmt.Errorf("healthcheck %s: %s: %s", target, resp.Status, line))
	}
	fmt.Fprintln(stdout, line)
	return nil
}
