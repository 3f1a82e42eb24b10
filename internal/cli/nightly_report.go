package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
	"github.com/tunefleet/tunefleet/report"

	"github.com/tunefleet/tunefleet/internal/clip"
)

func newNightlyReport(svc *services) *cobra.Command {
	var notify, format, uiURL string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "report NIGHTLY_ID [--notify URL]",
		Short: "Write a nightly's summary.json and report.html; send its webhook once if it has regressions or failures",
		Long: "Read nightly/<NIGHTLY_ID>/plan.json and each of its runs' history entries from --store, compare each run\n" +
			"with the entry before it on its platform, and write nightly/<NIGHTLY_ID>/summary.json and a self-contained\n" +
			"report.html (inline SVG charts, nothing fetched). With --notify URL (default: the plan's notify), POST a\n" +
			"Slack-compatible JSON body ({\"text\": …}) once per nightly when it has regressions or failures and no run\n" +
			"is pending: nightly/<NIGHTLY_ID>/notified.json records the send and, with --redis, a Redis claim keeps two\n" +
			"replicas from both sending. Safe to run again: the files are rewritten, the webhook is not resent.\n" +
			"The send is recorded before the POST: a receiver that gives no answer within --notify-timeout may still\n" +
			"have it, so it is reported as \"delivery unknown\" and never sent again (delete notified.json to resend).",
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
			if timeout <= 0 {
				return usageErr(fmt.Errorf("--notify-timeout %s: want a positive duration", timeout))
			}
			s, sent, err := report.MorningLinked(ctx, store, args[0], notify, claim, timeout, links)
			if errors.Is(err, report.ErrBadNightly) || errors.Is(err, report.ErrBadURL) {
				return usageErr(err)
			}
			if err != nil {
				return err
			}
			if format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					*report.Summary
					Webhook string `json:"webhook"`
				}{s, sent})
			}
			printMorning(cmd.OutOrStdout(), s, sent, svc.storeName())
			return nil
		},
	}
	cmd.Flags().StringVar(&notify, "notify", "", "webhook URL (Slack-compatible) to tell of regressions and failures (default: the plan's)")
	cmd.Flags().DurationVar(&timeout, "notify-timeout", report.DefaultNotifyTimeout, "how long the webhook's POST may take; with no answer by then its delivery is unknown and it is not sent again")
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
	fmt.Fprintf(out, "wrote %s and %s in %s; webhook: %s\n", report.SummaryKey(s.Nightly), report.ReportKey(s.Nightly), storeName, webhookNote(s.Nightly, sent))
}

// webhookNote is what Notify did, in words where it needs them.
func webhookNote(nightly, sent string) string {
	if sent == report.NotifyUnknown {
		return fmt.Sprintf("%s: a send was attempted and no answer came, so the receiver may have it; it is not sent again (delete %s to send it again)",
			sent, report.NotifiedKey(nightly))
	}
	return sent
}

// morningReport is the last step of `producer nightly --wait`: the
// morning report (report.Morning) once every run of the plan is final.
type morningReport struct {
	store     artifacts.Store
	rdb       redis.UniversalClient
	notify    string
	timeout   time.Duration
	storeName string
	out       io.Writer
	links     report.Links
}

func (m morningReport) Nightly(ctx context.Context, id string) error {
	var claim report.Claimer
	if m.rdb != nil {
		claim = report.RedisClaimer{RDB: m.rdb}
	}
	s, sent, err := report.MorningLinked(ctx, m.store, id, m.notify, claim, m.timeout, m.links)
	if err != nil {
		return fmt.Errorf("morning report of %s: %w", id, err)
	}
	printMorning(m.out, s, sent, m.storeName)
	return nil
}
