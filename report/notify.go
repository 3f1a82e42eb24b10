package report

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"
)

// What Notify did.
const (
	NotifySent        = "sent"
	NotifyAlreadySent = "already_sent" // the marker (or another replica's claim) says so
	NotifyNoNews      = "no_news"      // no regression, no failure: nothing is sent
	NotifyPending     = "pending"      // runs are not final yet: nothing is sent until they are
	NotifyNoURL       = "no_url"
	// NotifyUnknown: a send was attempted and no answer came (a timeout,
	// a dropped connection), or a sender died mid-send. The receiver may
	// have it; it is not sent again (at most once). Deleting
	// nightly/<id>/notified.json lets a later report send it.
	NotifyUnknown = "delivery_unknown"
)

// DefaultNotifyTimeout is how long a webhook POST may take.
const DefaultNotifyTimeout = 30 * time.Second

// Marker deliveries.
const (
	DeliverySending   = "sending"   // written before the POST
	DeliveryDelivered = "delivered" // the receiver answered 2xx
	DeliveryUnknown   = "unknown"   // no answer came
)

// Marker is nightly/<id>/notified.json: the webhook went. It never holds
// the URL (a Slack webhook URL is a secret).
type Marker struct {
	Nightly     string    `json:"nightly"`
	SentAt      time.Time `json:"sent_at"`
	Regressions int       `json:"regressions"`
	Failed      int       `json:"failed"`
	// Delivery is DeliverySending, DeliveryDelivered or DeliveryUnknown;
	// empty (a marker from before it was kept) is delivered.
	Delivery string `json:"delivery,omitempty"`
}

// Claimer makes the send once across replicas: Claim succeeds for one
// caller per key until Release; Done keeps the claim past its lease.
type Claimer interface {
	Claim(ctx context.Context, key string) (bool, error)
	Release(ctx context.Context, key string) error
	Done(ctx context.Context, key string) error
}

// RedisClaimer claims with SET NX: a claim is leased for ClaimLease (a
// replica that dies mid-send lets another try after it) and kept for
// ClaimKeep once the webhook went.
type RedisClaimer struct{ RDB redis.UniversalClient }

// Lease and keep of a Redis claim.
const (
	ClaimLease = 5 * time.Minute
	ClaimKeep  = 90 * 24 * time.Hour
)

func claimKey(key string) string { return "tunefleet:notify:" + key }

// Claim takes the key unless another caller holds it.
func (c RedisClaimer) Claim(ctx context.Context, key string) (bool, error) {
	ok, err := c.RDB.SetNX(ctx, claimKey(key), time.Now().UTC().Format(time.RFC3339Nano), ClaimLease).Result()
	if err != nil {
		return false, fmt.Errorf("claim the webhook of %s: %w", key, err)
	}
	return ok, nil
}

// Release gives a claim up (the send failed).
func (c RedisClaimer) Release(ctx context.Context, key string) error {
	return c.RDB.Del(ctx, claimKey(key)).Err()
}

// Done keeps the claim: the webhook went.
func (c RedisClaimer) Done(ctx context.Context, key string) error {
	return c.RDB.Expire(ctx, claimKey(key), ClaimKeep).Err()
}

// ErrBadURL marks a --notify URL that is not an http(s) URL.
var ErrBadURL = errors.New("bad webhook URL")

// CheckURL rejects a webhook URL that is not absolute http or https.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w %q: want an http:// or https:// URL (a Slack incoming webhook)", ErrBadURL, redact(raw))
	}
	return nil
}

// redact drops a URL's path and query (a webhook's secret) from messages.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Scheme + "://" + u.Host + "/…"
	}
	if len(raw) > 12 {
		return raw[:12] + "…"
	}
	return raw
}

// Notify posts the summary's webhook body to webhookURL at most once per
// nightly, when it has regressions or failures and no run is pending. The
// marker nightly/<id>/notified.json is written before the POST (delivery
// "sending") and checked before one, so a receiver that answers 2xx only
// after the client gave up is never sent the same report again; claim
// (nil: none) closes the window between two replicas that both find no
// marker. A receiver that answers, but not 2xx, did not take it: the
// marker and claim are removed and the error returned, so a retry sends.
// No answer at all leaves the marker as "unknown" and returns
// NotifyUnknown. client nil: a client with DefaultNotifyTimeout.
func Notify(ctx context.Context, store artifacts.Store, s *Summary, webhookURL string, claim Claimer, client *http.Client) (string, error) {
	switch {
	case webhookURL == "":
		return NotifyNoURL, nil
	case s.Totals.Pending > 0:
		return NotifyPending, nil
	case !s.HasNews():
		return NotifyNoNews, nil
	}
	if err := CheckURL(webhookURL); err != nil {
		return "", err
	}
	key := NotifiedKey(s.Nightly)
	var prev Marker
	switch err := artifacts.GetJSON(ctx, store, key, &prev); {
	case err == nil:
		if prev.Delivery == DeliverySending && claim != nil {
			// Sending: another replica is posting it now (it holds the
			// claim), or one died mid-send (its lease has lapsed).
			ok, err := claim.Claim(ctx, key)
			if err != nil {
				return "", err
			}
			if !ok {
				return NotifyAlreadySent, nil
			}
			claim.Release(context.WithoutCancel(ctx), key)
			return NotifyUnknown, nil
		}
		if prev.Delivery == DeliverySending || prev.Delivery == DeliveryUnknown {
			return NotifyUnknown, nil
		}
		return NotifyAlreadySent, nil
	case !errors.Is(err, artifacts.ErrNotExist):
		return "", fmt.Errorf("look up %s: %w", key, err)
	}
	if claim != nil {
		ok, err := claim.Claim(ctx, key)
		if err != nil {
			return "", err
		}
		if !ok {
			return NotifyAlreadySent, nil
		}
	}
	m := Marker{Nightly: s.Nightly, SentAt: time.Now().UTC(), Regressions: s.Totals.Regressions, Failed: s.Totals.Failed, Delivery: DeliverySending}
	if err := artifacts.PutJSON(ctx, store, key, m); err != nil {
		if claim != nil {
			claim.Release(context.WithoutCancel(ctx), key)
		}
		return "", fmt.Errorf("record the webhook before sending it (%s): %w", key, err)
	}
	answered, err := post(ctx, client, webhookURL, WebhookBody(s))
	bg := context.WithoutCancel(ctx)
	switch {
	case err != nil && answered:
		// The receiver said no: nothing was delivered, a retry may send.
		if derr := store.Delete(bg, key); derr != nil {
			return "", fmt.Errorf("%w (and removing %s failed, so no later report sends it: %v)", err, key, derr)
		}
		if claim != nil {
			claim.Release(bg, key)
		}
		return "", err
	case err != nil:
		m.Delivery = DeliveryUnknown
		if claim != nil {
			claim.Done(bg, key)
		}
		if perr := artifacts.PutJSON(bg, store, key, m); perr != nil {
			return NotifyUnknown, fmt.Errorf("webhook delivery unknown (%v), and updating %s failed: %w", err, key, perr)
		}
		return NotifyUnknown, nil
	}
	if claim != nil {
		if err := claim.Done(ctx, key); err != nil {
			return NotifySent, fmt.Errorf("the webhook went, but keeping its claim failed: %w", err)
		}
	}
	m.Delivery, m.SentAt = DeliveryDelivered, time.Now().UTC()
	if err := artifacts.PutJSON(ctx, store, key, m); err != nil {
		return NotifySent, fmt.Errorf("the webhook went, but recording its delivery in %s failed: %w", key, err)
	}
	return NotifySent, nil
}

// post sends body; answered says whether the receiver answered at all
// (false: a timeout or a dropped connection, delivery unknown).
func post(ctx context.Context, client *http.Client, webhookURL string, body any) (answered bool, err error) {
	if client == nil {
		client = &http.Client{Timeout: DefaultNotifyTimeout}
	}
	data, err := json.Marshal(body)
	if err != nil {
		return true, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, webhookURL, bytes.NewReader(data))
	if err != nil {
		return true, fmt.Errorf("webhook %s: %w", redact(webhookURL), err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		// The error names the URL, which may hold the secret: say less.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return false, fmt.Errorf("webhook %s: %w", redact(webhookURL), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return true, fmt.Errorf("webhook %s answered %s: %s", redact(webhookURL), resp.Status, strings.TrimSpace(string(msg)))
	}
	return true, nil
}

// Webhook is the JSON body: Slack's incoming-webhook shape (text, in
// Slack's mrkdwn), which other chat tools' Slack-compatible endpoints
// take too.
type Webhook struct {
	Text string `json:"text"`
}

// WebhookBody says what went wrong in a nightly, a line per regression
// and failure, and what is new: a line per new version of a model (at
// most maxLines in all, then how many more).
func WebhookBody(s *Summary) Webhook {
	const maxLines = 20
	t := s.Totals
	var b strings.Builder
	fmt.Fprintf(&b, "*tunefleet nightly %s*: %d regression(s), %d failed of %d (%d unchanged); %s spent, %s saved by reuse",
		s.Nightly, t.Regressions, t.Failed, t.Entries, t.Unchanged, seconds(t.GPUSecondsSpent, t.CPUSecondsSpent), seconds(t.GPUSecondsSaved, t.CPUSecondsSaved))
	if t.SettingsChanged > 0 {
		fmt.Fprintf(&b, "; %d with settings changed (their moves are not counted as regressions)", t.SettingsChanged)
	}
	if t.NewVersions > 0 {
		fmt.Fprintf(&b, "; %d new version(s) (their moves are not counted as regressions)", t.NewVersions)
	}
	if t.WinnerChanges > 0 {
		fmt.Fprintf(&b, "; %d winner change(s)", t.WinnerChanges)
	}
	var lines []string
	for _, e := range s.Entries {
		where := e.Model + " on " + e.Target
		switch e.Status {
		case StatusNotSubmitted:
			lines = append(lines, fmt.Sprintf("• %s: not submitted: %s", where, e.Error))
		case StatusFailed, StatusCancelled:
			lines = append(lines, fmt.Sprintf("• %s: run %s %s: %s", where, e.Run, e.Status, strings.Join(e.Reasons, "; ")))
		}
		if e.NewVersion != "" {
			lines = append(lines, fmt.Sprintf("• %s: new version: %s", where, e.NewVersion))
		}
		if e.SettingsChanged != "" {
			lines = append(lines, fmt.Sprintf("• %s: settings changed: %s", where, e.SettingsChanged))
		}
		for _, c := range e.Changes {
			if c.Regression || c.Kind == history.ChangeWinner {
				lines = append(lines, fmt.Sprintf("• %s graph %s %s: %s", where, c.Graph, strings.ReplaceAll(c.Kind, "_", " "), c.Detail))
			}
		}
	}
	for i, l := range lines {
		if i == maxLines {
			fmt.Fprintf(&b, "\n… and %d more (see nightly/%s/report.html)", len(lines)-maxLines, s.Nightly)
			break
		}
		b.WriteString("\n" + l)
	}
	return Webhook{Text: b.String()}
}

func seconds(gpu, cpu float64) string {
	switch {
	case gpu > 0 && cpu > 0:
		return fmt.Sprintf("%.1f GPU-min + %.1f CPU-min", gpu/60, cpu/60)
	case cpu > 0:
		return fmt.Sprintf("%.1f CPU-min", cpu/60)
	}
	return fmt.Sprintf("%.1f GPU-min", gpu/60)
}

// Morning is the whole morning report of a nightly, what `producer
// nightly report` and `producer nightly --wait` (once every run of the
// plan is final) run: read the plan, write summary.json and report.html,
// and send the webhook to notifyURL (empty: the plan's notify) if it is
// due. It returns the summary and what Notify did.
//
// timeout bounds the webhook's POST (0: DefaultNotifyTimeout).
func Morning(ctx context.Context, store artifacts.Store, nightly, notifyURL string, claim Claimer, timeout time.Duration) (*Summary, string, error) {
	return MorningLinked(ctx, store, nightly, notifyURL, claim, timeout, Links{})
}

// MorningLinked is Morning with report.html's run ids, models and nightly
// linked into the web UI as l says (producer nightly report --ui-url).
func MorningLinked(ctx context.Context, store artifacts.Store, nightly, notifyURL string, claim Claimer, timeout time.Duration, l Links) (*Summary, string, error) {
	plan, err := ReadPlan(ctx, store, nightly)
	if err != nil {
		return nil, "", err
	}
	if notifyURL == "" {
		notifyURL = plan.Notify
	}
	if notifyURL != "" {
		if err := CheckURL(notifyURL); err != nil {
			return nil, "", err // before anything is written
		}
	}
	s, err := Nightly(ctx, store, plan, l)
	if err != nil {
		return nil, "", err
	}
	sent, err := Notify(ctx, store, s, notifyURL, claim, &http.Client{Timeout: cmp.Or(timeout, DefaultNotifyTimeout)})
	return s, sent, err
}

// Warn posts a one-off warning to a webhook, in the morning report's
// Slack-compatible body: the nightly's deadline warning
// (fleet.DeadlineWarning), sent by the producer that writes the plan, so
// once per night. timeout 0: DefaultNotifyTimeout.
func Warn(ctx context.Context, webhookURL, text string, timeout time.Duration) error {
	if err := CheckURL(webhookURL); err != nil {
		return err
	}
	_, err := post(ctx, &http.Client{Timeout: cmp.Or(timeout, DefaultNotifyTimeout)}, webhookURL, Webhook{Text: text})
	return err
}
