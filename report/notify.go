package report

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/history"

	"github.com/tunefleet/tunefleet/internal/human"
	"github.com/tunefleet/tunefleet/internal/webhook"
)

// What Notify did.
const (
	NotifySent        = "sent"         // delivered now: the receiver answered 2xx
	NotifyAlreadySent = "already_sent" // delivered before (the marker says so); --resend sends it again
	NotifyInFlight    = "in_flight"    // another replica is delivering it now (it holds the claim)
	NotifyNoNews      = "no_news"      // no regression, no failure: nothing is sent
	NotifyPending     = "pending"      // runs are not final yet: nothing is sent until they are
	NotifyNoURL       = "no_url"
	// NotifyFailed: every try failed within the retry window, or the
	// receiver refused it (a 4xx). The marker says so with the last
	// error; the next report tries it again, as the same delivery.
	NotifyFailed = "failed"
)

// DefaultNotifyTimeout is how long one try of a webhook POST may take.
const DefaultNotifyTimeout = webhook.DefaultTimeout

// DefaultNotifyRetryFor is how long a webhook delivery is tried.
const DefaultNotifyRetryFor = webhook.DefaultRetryFor

// Marker deliveries.
const (
	DeliverySending   = "sending"   // a sender is trying it (the marker is renewed before each try)
	DeliveryDelivered = "delivered" // the receiver answered 2xx
	DeliveryFailed    = "failed"    // the tries ended without a 2xx: LastError says why
	// DeliveryUnknown is a marker from before deliveries were retried (no
	// answer came); it is delivered again, as a new delivery.
	DeliveryUnknown = "unknown"
)

// Marker is nightly/<id>/notified.json: the delivery of the nightly's
// webhook. It never holds the URL (a Slack webhook URL is a secret).
type Marker struct {
	Nightly     string    `json:"nightly"`
	SentAt      time.Time `json:"sent_at"` // this delivery's first try
	Regressions int       `json:"regressions"`
	Failed      int       `json:"failed"`
	// Delivery is DeliverySending, DeliveryDelivered or DeliveryFailed;
	// empty (a marker from before it was kept) is delivered.
	Delivery string `json:"delivery,omitempty"`
	// EventID names the nightly's report: the same on every delivery.
	EventID string `json:"event_id,omitempty"`
	// DeliveryID names this delivery: the same on every try of it (the
	// X-Tunefleet-Delivery header); a resend is a new one.
	DeliveryID string `json:"delivery_id,omitempty"`
	// Attempts counts this delivery's tries so far, over every report.
	Attempts int `json:"attempts,omitempty"`
	// TriedAt is the latest try (or wait between tries): a "sending"
	// marker older than ClaimLease is a sender that died.
	TriedAt     time.Time  `json:"tried_at,omitzero"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
	FailedAt    *time.Time `json:"failed_at,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	// Resends counts the deliveries after the first (--resend).
	Resends int `json:"resends,omitempty"`
}

// EventID is a nightly report's event id: the X-Tunefleet-Event header
// and the body's event_id on every delivery of it.
func EventID(nightly string) string { return "nightly-report-" + nightly }

// Claimer makes the send once across replicas: Claim succeeds for one
// caller per key until Release; Renew extends a held claim's lease while
// it is tried; Done keeps the claim past its lease.
type Claimer interface {
	Claim(ctx context.Context, key string) (bool, error)
	Renew(ctx context.Context, key string) error
	Release(ctx context.Context, key string) error
	Done(ctx context.Context, key string) error
}

// RedisClaimer claims with SET NX: a claim is leased for ClaimLease,
// renewed before each try (a replica that dies mid-send lets another try
// after it), and kept for ClaimKeep once the webhook went.
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

// Renew extends a held claim's lease by ClaimLease.
func (c RedisClaimer) Renew(ctx context.Context, key string) error {
	if err := c.RDB.Expire(ctx, claimKey(key), ClaimLease).Err(); err != nil {
		return fmt.Errorf("renew the claim of the webhook of %s: %w", key, err)
	}
	return nil
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
		return fmt.Errorf("%w %q: want an http:// or https:// URL (a Slack incoming webhook)", ErrBadURL, webhook.Redact(raw))
	}
	return nil
}

// NotifyOptions say how Notify sends.
type NotifyOptions struct {
	// Claim (nil: none) keeps two replicas from both sending.
	Claim Claimer
	// Policy says how long and how often a delivery is tried (the zero
	// Policy: webhook's defaults, 10 minutes). Its Beat is Notify's own.
	Policy webhook.Policy
	// Resend delivers a nightly already delivered (or failed) again, as
	// a new delivery: a new delivery id, the same event id.
	Resend bool
}

// Notify delivers the summary's webhook body to webhookURL at least
// once per nightly, when it has regressions or failures and no run is
// pending, and reports what it did.
//
// The marker nightly/<id>/notified.json is written before the first try
// (delivery "sending", with the delivery id every try carries) and
// renewed before each; a 2xx marks it delivered and no later report
// sends it again (but Resend). Tries that end without a 2xx mark it
// failed with the last error and return NotifyFailed with an error
// wrapping webhook.ErrGaveUp or webhook.ErrRefused; the next report tries
// the same delivery again. A "sending" marker is a delivery in flight
// while its claim (with a Claimer) is held or its latest try is younger
// than ClaimLease (without one), and a sender that died otherwise: its
// delivery is taken over, with its id, so a receiver that had it drops it.
func Notify(ctx context.Context, store artifacts.Store, s *Summary, webhookURL string, o NotifyOptions) (string, error) {
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
	found := true
	switch err := artifacts.GetJSON(ctx, store, key, &prev); {
	case errors.Is(err, artifacts.ErrNotExist):
		found = false
	case err != nil:
		return "", fmt.Errorf("look up %s: %w", key, err)
	}
	now := time.Now().UTC()
	m := Marker{Nightly: s.Nightly, SentAt: now, Regressions: s.Totals.Regressions, Failed: s.Totals.Failed,
		EventID: EventID(s.Nightly), DeliveryID: webhook.NewID()}
	if found {
		m.Resends = prev.Resends
		same := func() { // go on with prev's delivery: its id, its count
			m.SentAt, m.DeliveryID, m.Attempts = prev.SentAt, cmp.Or(prev.DeliveryID, m.DeliveryID), prev.Attempts
		}
		switch prev.Delivery {
		case DeliverySending:
			if o.Claim == nil && now.Sub(prev.TriedAt) < ClaimLease {
				return NotifyInFlight, nil
			}
			same() // the claim decides below: held is in flight, free is a sender that died
		case DeliveryFailed:
			same()
		case DeliveryUnknown:
			// No id was sent with it: a new delivery, under a claim of its
			// own (the old one was kept for ClaimKeep).
			m.Resends = prev.Resends + 1
		default: // delivered
			if !o.Resend {
				return NotifyAlreadySent, nil
			}
		}
		if o.Resend && prev.Delivery != DeliverySending {
			m = Marker{Nightly: m.Nightly, SentAt: now, Regressions: m.Regressions, Failed: m.Failed,
				EventID: m.EventID, DeliveryID: webhook.NewID(), Resends: prev.Resends + 1}
		}
	}
	// Each delivery has its own claim: two resends at once claim the same.
	ck := key
	if m.Resends > 0 {
		ck = fmt.Sprintf("%s#%d", key, m.Resends)
	}
	if o.Claim != nil {
		ok, err := o.Claim.Claim(ctx, ck)
		if err != nil {
			return "", err
		}
		if !ok {
			// Another replica holds it: sending it now, or it went.
			if cur, err := ReadMarker(ctx, store, s.Nightly); err == nil && cur != nil && cur.Resends >= m.Resends &&
				(cur.Delivery == DeliveryDelivered || cur.Delivery == "") {
				return NotifyAlreadySent, nil
			}
			return NotifyInFlight, nil
		}
	}
	body, err := json.Marshal(Webhook{Text: WebhookBody(s).Text, EventID: m.EventID, DeliveryID: m.DeliveryID})
	if err != nil {
		return "", err
	}
	p := o.Policy
	p.Beat = func(ctx context.Context, attempt int) error {
		if o.Claim != nil {
			if err := o.Claim.Renew(ctx, ck); err != nil {
				return err
			}
		}
		m.Delivery, m.TriedAt = DeliverySending, time.Now().UTC()
		if attempt > 0 {
			m.Attempts++
		}
		if err := artifacts.PutJSON(ctx, store, key, m); err != nil {
			return fmt.Errorf("record the webhook's try in %s: %w", key, err)
		}
		return nil
	}
	_, err = webhook.Post(ctx, webhookURL, body, webhook.IDs{Event: m.EventID, Delivery: m.DeliveryID}, p)
	bg := context.WithoutCancel(ctx)
	at := time.Now().UTC()
	if err != nil {
		m.Delivery, m.FailedAt, m.LastError = DeliveryFailed, &at, err.Error()
		if o.Claim != nil {
			o.Claim.Release(bg, ck) // the next report tries it again
		}
		if perr := artifacts.PutJSON(bg, store, key, m); perr != nil {
			return NotifyFailed, fmt.Errorf("%w (and recording that in %s failed: %v)", err, key, perr)
		}
		return NotifyFailed, err
	}
	m.Delivery, m.DeliveredAt, m.LastError = DeliveryDelivered, &at, ""
	if o.Claim != nil {
		if err := o.Claim.Done(bg, ck); err != nil {
			return NotifySent, fmt.Errorf("the webhook went, but keeping its claim failed: %w", err)
		}
	}
	if err := artifacts.PutJSON(bg, store, key, m); err != nil {
		return NotifySent, fmt.Errorf("the webhook went, but recording its delivery in %s failed: %w", key, err)
	}
	return NotifySent, nil
}

// ReadMarker reads a nightly's delivery record (nil: no webhook tried).
func ReadMarker(ctx context.Context, store artifacts.Store, nightly string) (*Marker, error) {
	var m Marker
	switch err := artifacts.GetJSON(ctx, store, NotifiedKey(nightly), &m); {
	case errors.Is(err, artifacts.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", NotifiedKey(nightly), err)
	}
	return &m, nil
}

// Line says a delivery in one line: when it was delivered and in how
// many tries, or that it finally failed and why ("" for nil).
func (m *Marker) Line() string {
	if m == nil {
		return ""
	}
	return "webhook " + m.Detail()
}

// Detail is Line without the word "webhook".
func (m *Marker) Detail() string {
	tries := webhook.Tries(m.Attempts)
	switch m.Delivery {
	case DeliveryDelivered, "":
		if m.DeliveredAt == nil {
			return "delivered"
		}
		return fmt.Sprintf("delivered at %s after %s (delivery %s)", human.Time(*m.DeliveredAt), tries, m.DeliveryID)
	case DeliveryFailed:
		at := ""
		if m.FailedAt != nil {
			at = " at " + human.Time(*m.FailedAt)
		}
		return fmt.Sprintf("NOT delivered: failed%s after %s (delivery %s): %s; the next report tries again", at, tries, m.DeliveryID, m.LastError)
	case DeliverySending:
		return fmt.Sprintf("being delivered: %s so far (delivery %s)", tries, m.DeliveryID)
	}
	return "delivery unknown (a send from before retries: the next report sends it again)"
}

// Webhook is the JSON body: Slack's incoming-webhook shape (text, in
// Slack's mrkdwn), which other chat tools' Slack-compatible endpoints
// take too.
//
// EventID and DeliveryID repeat the X-Tunefleet-Event and
// X-Tunefleet-Delivery headers for receivers that see only the body.
type Webhook struct {
	Text       string `json:"text"`
	EventID    string `json:"event_id,omitempty"`
	DeliveryID string `json:"delivery_id,omitempty"`
}

// WebhookBody says what went wrong in a nightly, a line per regression
// and failure, and what is new: a line per new version of a model (at
// most maxLines in all, then how many more).
func WebhookBody(s *Summary) Webhook {
	const maxLines = 20
	t := s.Totals
	var b strings.Builder
	fmt.Fprintf(&b, "*tunefleet nightly %s*: %d regression(s), %d failed of %d (%d unchanged); %s spent, %s saved by reuse",
		s.Nightly, t.Regressions, t.Failed, t.Entries, t.Unchanged, seconds(s, t.GPUSecondsSpent, t.CPUSecondsSpent), seconds(s, t.GPUSecondsSaved, t.CPUSecondsSaved))
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

// seconds is device time in minutes, named for the devices the nightly
// ran on: CPU-min for a CPU-only nightly (even at zero), GPU-min for a
// GPU-only one, both for a mixed one.
func seconds(s *Summary, gpu, cpu float64) string {
	usesCPU, usesGPU := s.devices()
	switch {
	case gpu > 0 && cpu > 0, usesCPU && usesGPU:
		return fmt.Sprintf("%.1f GPU-min + %.1f CPU-min", gpu/60, cpu/60)
	case cpu > 0 || usesCPU:
		return fmt.Sprintf("%.1f CPU-min", cpu/60)
	case gpu > 0 || usesGPU:
		return fmt.Sprintf("%.1f GPU-min", gpu/60)
	}
	return fmt.Sprintf("%.1f machine-min", (gpu+cpu)/60) // nothing ran: no device to name
}

// devices says which kinds of device the nightly's runs ran on (an
// entry's Device; a run not final has none yet).
func (s *Summary) devices() (cpu, gpu bool) {
	for _, e := range s.Entries {
		switch e.Device {
		case "":
		case "cpu":
			cpu = true
		default:
			gpu = true
		}
	}
	return cpu, gpu
}

// Morning is the whole morning report of a nightly, what `producer
// nightly report` and `producer nightly --wait` (once every run of the
// plan is final) run: read the plan, write summary.json and report.html,
// and deliver the webhook to notifyURL (empty: the plan's notify) if it
// is due (Notify, as o says), then write them again with what the
// delivery came to. It returns the summary and what Notify did; a
// delivery that failed returns NotifyFailed and its error, with the
// files written.
func Morning(ctx context.Context, store artifacts.Store, nightly, notifyURL string, o NotifyOptions) (*Summary, string, error) {
	return MorningLinked(ctx, store, nightly, notifyURL, o, Links{})
}

// MorningLinked is Morning with report.html's run ids, models and nightly
// linked into the web UI as l says (producer nightly report --ui-url).
func MorningLinked(ctx context.Context, store artifacts.Store, nightly, notifyURL string, o NotifyOptions, l Links) (*Summary, string, error) {
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
	sent, nerr := Notify(ctx, store, s, notifyURL, o)
	if sent == NotifySent || sent == NotifyFailed {
		// The files say what the delivery came to.
		bg := context.WithoutCancel(ctx)
		m, err := ReadMarker(bg, store, nightly)
		if err == nil {
			s.Webhook = m
			err = write(bg, store, s, l)
		}
		if err != nil && nerr == nil {
			nerr = err
		}
	}
	return s, sent, nerr
}

// DefaultWarnRetryFor is how long a warning (Warn) is tried: the
// producer that sends it waits for it.
const DefaultWarnRetryFor = time.Minute

// Warn delivers a one-off warning to a webhook, in the morning report's
// Slack-compatible body, with a delivery id of its own and tries as p
// says (p.For 0: DefaultWarnRetryFor): the nightly's deadline warning
// (fleet.DeadlineWarning), sent by the producer that writes the plan, so
// once per night.
func Warn(ctx context.Context, webhookURL, text string, p webhook.Policy) error {
	if err := CheckURL(webhookURL); err != nil {
		return err
	}
	p.For = cmp.Or(p.For, DefaultWarnRetryFor)
	ids := webhook.IDs{Delivery: webhook.NewID()}
	ids.Event = "warning-" + ids.Delivery
	body, err := json.Marshal(Webhook{Text: text, EventID: ids.Event, DeliveryID: ids.Delivery})
	if err != nil {
		return err
	}
	_, err = webhook.Post(ctx, webhookURL, body, ids, p)
	return err
}
