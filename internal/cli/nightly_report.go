package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/report"

	"github.com/tunefleet/tunefleet/internal/clip"
	"github.com/tunefleet/tunefleet/internal/webhook"
)

func newNightlyReport(svc *services) *cobra.Command {
	var notify, format, uiURL string
	var timeout, retryFor time.Duration
	var resend bool
	cmd := &cobra.Command{
		Use:   "report NIGHTLY_ID [--notify URL]",
		Short: "Write a nightly's summary.json and report.html; send its webhook once if it has regressions or failures",
		Long: "Read nightly/<NIGHTLY_ID>/plan.json and each of its runs' history entries from --store, compare each run\n" +
			"with the entry before it on its platform, and write nightly/<NIGHTLY_ID>/summary.json and a self-contained\n" +
			"report.html (inline SVG charts, nothing fetched). With --notify URL (default: the plan's notify), POST a\n" +
			"Slack-compatible JSON body ({\"text\": …, \"event_id\": …, \"delivery_id\": …}) when it has regressions or\n" +
			"failures and no run is pending, at least once: each try carries the same X-Tunefleet-Delivery id (a\n" +
			"receiver de-duplicates on it) and the nightly's X-Tunefleet-Event id. A connection error, a timeout\n" +
			"(--notify-timeout), 408, 429 (its Retry-After honoured) or 5xx is tried again with exponential backoff and\n" +
			"jitter for --notify-retry-for; a 2xx is never sent again; another 4xx is not tried again. What the delivery\n" +
			"came to is in nightly/<NIGHTLY_ID>/notified.json, summary.json and report.html; a delivery that failed\n" +
			"exits 3 and the next report tries it again. With --redis, a Redis claim keeps two replicas from both\n" +
			"sending. --resend sends a delivered report again as a new delivery (a new delivery id, the same event id).\n",
		Example: "  producer nightly report 2026-12-01-0123456789ab --notify https://hooks.slack.com/services/T/B/X",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !okFormat(&format, "text") {
				return usageErr(fmt.Errorf("-o %q: want text or json", format))
			}
			if err := report.CheckNightly(args[0]); err != nil {
				return usageErr(err)
			}
			if notify != "" {
				if err := report.CheckURL(notify); err != nil {
					return usageErr(fmt.Errorf("--notify: %w", err))
				}
			}
			ctx := cmd.Context()
			store, err := svc.openStoreToRead(ctx)
			if err != nil {
				return err
			}
			var claim report.Claimer
			if svc.redis != "" {
				rdb, err := svc.openRedis(ctx)
				if err != nil {
					return err
				}
				defer rdb.Close()
				claim = report.RedisClaimer{RDB: rdb}
			}
			links, err := uiLinks(uiURL)
			if err != nil {
				return err
			}
			policy, err := notifyPolicy(timeout, retryFor)
			if err != nil {
				return err
			}
			s, sent, err := report.MorningLinked(ctx, store, args[0], notify, report.NotifyOptions{Claim: claim, Policy: policy, Resend: resend}, links)
			if errors.Is(err, report.ErrBadNightly) || errors.Is(err, report.ErrBadURL) {
				return usageErr(err)
			}
			if err != nil && sent != report.NotifyFailed {
				return err
			}
			if err != nil {
				// A failed delivery: the report is written and printed,
				// and the exit says the webhook (a service) did not take it.
				err = fmt.Errorf("webhook of nightly %s not delivered (see %s; the next report tries again): %w", args[0], report.NotifiedKey(args[0]), err)
			}
			if format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if eerr := enc.Encode(struct {
					*report.Summary
					Webhook string `json:"webhook"`
				}{s, sent}); eerr != nil {
					return eerr
				}
				return err
			}
			printMorning(cmd.OutOrStdout(), s, sent, svc.storeName())
			return err
		},
	}
	cmd.Flags().StringVar(&notify, "notify", "", "webhook URL (Slack-compatible) to tell of regressions and failures (default: the plan's)")
	cmd.Flags().DurationVar(&timeout, "notify-timeout", report.DefaultNotifyTimeout, "how long one try of the webhook's POST may take; with no answer by then it is tried again (with the same delivery id)")
	cmd.Flags().DurationVar(&retryFor, "notify-retry-for", defaultRetryFor(), "how long the webhook's delivery is tried before it is recorded as failed (default $"+NotifyRetryForEnv+", else 10m)")
	cmd.Flags().BoolVar(&resend, "resend", false, "send a report already delivered again: a new delivery (new X-Tunefleet-Delivery id) of the same event (same X-Tunefleet-Event id)")
	cmd.Flags().StringVarP(&format, "output", "o", "text", "output format: text (or table) or json")
	cmd.Flags().StringVar(&uiURL, "ui-url", "", "the web UI's URL (producer serve), e.g. http://tunefleet.example:8080: report.html links its runs, models and nightly there (default: no links)")
	return cmd
}

// uiLinks checks a --ui-url and makes report.html's links from it.
func uiLinks(raw string) (report.Links, error) {
	if raw == "" {
		return report.Links{}, nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return report.Links{}, usageErr(fmt.Errorf("--ui-url %q: want the http:// or https:// URL producer serve answers on, e.g. http://tunefleet.example:8080", clip.Counted(raw, clip.Echo)))
	}
	return report.UILinks(raw), nil
}

// printMorning prints a morning report: totals, each new version,
// settings change, regression, change of winner and failure, and where it
// was written.
func printMorning(out io.Writer, s *report.Summary, sent, storeName string) {
	t := s.Totals
	fmt.Fprintf(out, "nightly %s: %d model × target, %d done, %d failed, %d pending, %d unchanged; %d regression(s), %d faster, %d winner change(s), %d newly failing, %d recovered, %d new version(s)\n",
		s.Nightly, t.Entries, t.Done, t.Failed, t.Pending, t.Unchanged, t.Regressions, t.Faster, t.WinnerChanges, t.NewlyFailing, t.Recovered, t.NewVersions)
	for _, e := range s.Entries {
		if e.NewVersion != "" {
			fmt.Fprintf(out, "+ %s on %s new version: %s\n", e.Model, e.Target, e.NewVersion)
		}
		if e.SettingsChanged != "" {
			fmt.Fprintf(out, "~ %s on %s settings changed: %s\n", e.Model, e.Target, e.SettingsChanged)
		}
		for _, c := range e.Changes {
			switch {
			case c.Regression:
				fmt.Fprintf(out, "! %s on %s graph %s %s: %s\n", e.Model, e.Target, c.Graph, c.Kind, c.Detail)
			case c.Kind == history.ChangeWinner:
				fmt.Fprintf(out, "* %s on %s graph %s %s: %s\n", e.Model, e.Target, c.Graph, c.Kind, c.Detail)
			}
		}
		if e.Status == report.StatusFailed || e.Status == report.StatusCancelled || e.Status == report.StatusNotSubmitted {
			fmt.Fprintf(out, "! %s on %s %s: %s%v\n", e.Model, e.Target, e.Status, e.Error, e.Reasons)
		}
	}
	if line := s.Finish.Line(); line != "" {
		fmt.Fprintln(out, line)
	}
	fmt.Fprintf(out, "wrote %s and %s in %s; %s\n", report.SummaryKey(s.Nightly), report.ReportKey(s.Nightly), storeName, webhookNote(s, sent))
}

// webhookNote is what Notify did, in words where it needs them.
func webhookNote(s *report.Summary, sent string) string {
	switch sent {
	case report.NotifySent, report.NotifyFailed:
		return "webhook: " + sent + ": " + s.Webhook.Detail()
	case report.NotifyInFlight:
		return "webhook: " + sent + ": another replica is delivering it now"
	case report.NotifyAlreadySent:
		return "webhook: " + sent + " (--resend sends it again)"
	}
	return "webhook: " + sent
}

// NotifyRetryForEnv is the default of --notify-retry-for.
const NotifyRetryForEnv = "TUNEFLEET_NOTIFY_RETRY_FOR"

// defaultRetryFor is $TUNEFLEET_NOTIFY_RETRY_FOR when it is a duration
// (a bad one is refused by notifyPolicy), else the webhook default.
func defaultRetryFor() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(NotifyRetryForEnv)); err == nil {
		return d
	}
	return report.DefaultNotifyRetryFor
}

// notifyPolicy checks --notify-timeout and --notify-retry-for and makes
// the webhook's delivery policy of them.
func notifyPolicy(timeout, retryFor time.Duration) (webhook.Policy, error) {
	if timeout <= 0 {
		return webhook.Policy{}, usageErr(fmt.Errorf("--notify-timeout %s: want a positive duration", timeout))
	}
	if e := os.Getenv(NotifyRetryForEnv); e != "" {
		if d, err := time.ParseDuration(e); err != nil || d <= 0 {
			return webhook.Policy{}, usageErr(fmt.Errorf("$%s %q: want a positive duration, e.g. 10m", NotifyRetryForEnv, clip.Counted(e, clip.Echo)))
		}
	}
	if retryFor <= 0 {
		return webhook.Policy{}, usageErr(fmt.Errorf("--notify-retry-for %s: want a positive duration, e.g. 10m", retryFor))
	}
	return webhook.Policy{Timeout: timeout, For: retryFor}, nil
}

// morningReport is the last step of `producer nightly --wait`: the
// morning report (report.Morning) once every run of the plan is final.
type morningReport struct {
	store     artifacts.Store
	rdb       redis.UniversalClient
	notify    string
	policy    webhook.Policy
	storeName string
	out       io.Writer
	links     report.Links
}

func (m morningReport) Nightly(ctx context.Context, id string) error {
	o := report.NotifyOptions{Policy: m.policy}
	if m.rdb != nil {
		o.Claim = report.RedisClaimer{RDB: m.rdb}
	}
	s, sent, err := report.MorningLinked(ctx, m.store, id, m.notify, o, m.links)
	if err != nil && sent != report.NotifyFailed {
		return fmt.Errorf("morning report of %s: %w", id, err)
	}
	printMorning(m.out, s, sent, m.storeName)
	if err != nil {
		return fmt.Errorf("morning report of %s: webhook not delivered (the next report tries again): %w", id, err)
	}
	return nil
}
