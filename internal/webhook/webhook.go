package webhook

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Headers every try carries.
const (
	// HeaderEvent names what happened (a nightly's morning report): the
	// same on every delivery of it, a resend included.
	HeaderEvent = "X-Tunefleet-Event"
	// HeaderDelivery names one delivery: the same on every try of it, so
	// a receiver that got it twice (a 2xx lost on the way back) drops the
	// second; a deliberate resend is a new delivery with a new id.
	HeaderDelivery = "X-Tunefleet-Delivery"
	// HeaderAttempt is the try's number, from 1.
	HeaderAttempt = "X-Tunefleet-Attempt"
)

// Policy defaults.
const (
	DefaultRetryFor = 10 * time.Minute // how long a delivery is tried
	DefaultTimeout  = 30 * time.Second // one try's POST
	DefaultInitial  = time.Second      // the first wait
	DefaultMax      = time.Minute      // the longest wait between tries
	// BeatEvery bounds the time between two Beat calls while waiting, so
	// a claim leased for a few minutes outlives any wait.
	BeatEvery = time.Minute
)

// Policy says how long and how often a delivery is tried. The zero
// Policy is the defaults.
type Policy struct {
	For     time.Duration // tries start no later than this after the first (0: DefaultRetryFor; <0: one try)
	Timeout time.Duration // one try (0: DefaultTimeout)
	Initial time.Duration // the first backoff (0: DefaultInitial); each next doubles, up to Max
	Max     time.Duration // 0: DefaultMax
	// Client posts (nil: one with Timeout).
	Client *http.Client
	// Beat, when set, is called before each try with its number, and
	// with 0 at least every BeatEvery while waiting for the next: the
	// caller records the try and renews its lease. An error stops the
	// delivery with it.
	Beat func(ctx context.Context, attempt int) error
}

func (p Policy) withDefaults() Policy {
	if p.For == 0 {
		p.For = DefaultRetryFor
	}
	if p.Timeout <= 0 {
		p.Timeout = DefaultTimeout
	}
	if p.Initial <= 0 {
		p.Initial = DefaultInitial
	}
	if p.Max <= 0 {
		p.Max = DefaultMax
	}
	if p.Client == nil {
		p.Client = &http.Client{Timeout: p.Timeout}
	}
	return p
}

// IDs name a delivery and its event.
type IDs struct {
	Event    string
	Delivery string
}

// NewID is a new random delivery id: 32 hex digits.
func NewID() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// What stopped a delivery short of a 2xx (errors.Is).
var (
	// ErrRefused: the receiver answered, not 2xx, with a status that is
	// not tried again (a 4xx other than 408 and 429).
	ErrRefused = errors.New("refused")
	// ErrGaveUp: every try failed and the retry window is spent.
	ErrGaveUp = errors.New("gave up")
)

// Result is what a delivery came to.
type Result struct {
	Attempts int
	// Last is the last try's error (nil once delivered).
	Last error
}

// Post delivers body (JSON) to rawURL: tries until a 2xx, an answer not
// tried again (ErrRefused), the retry window spent (ErrGaveUp) or ctx
// done. The error never holds the URL's path (a webhook's secret).
func Post(ctx context.Context, rawURL string, body []byte, ids IDs, p Policy) (Result, error) {
	p = p.withDefaults()
	start := time.Now()
	var res Result
	for attempt := 1; ; attempt++ {
		if p.Beat != nil {
			if err := p.Beat(ctx, attempt); err != nil {
				return res, err
			}
		}
		res.Attempts = attempt
		retry, after, err := try(ctx, p.Client, rawURL, body, ids, attempt)
		res.Last = err
		if err == nil {
			return res, nil
		}
		if !retry {
			return res, fmt.Errorf("%w (not tried again: the receiver answered, and only a timeout, 408, 429 or 5xx is): %w", ErrRefused, err)
		}
		wait := backoff(p, attempt)
		if after > 0 {
			wait = after // the receiver said when
		}
		if p.For < 0 || time.Since(start)+wait > p.For {
			if after > 0 && p.For > 0 {
				err = fmt.Errorf("%w; it asked to be tried after %s, past the %s retry window", err, after, p.For)
			}
			return res, fmt.Errorf("%w after %s over %s: %w", ErrGaveUp, Tries(attempt), time.Since(start).Round(time.Millisecond), err)
		}
		if err := sleep(ctx, wait, p.Beat); err != nil {
			return res, fmt.Errorf("%w (after %s; the last: %v)", err, Tries(attempt), res.Last)
		}
	}
}

// backoff is the wait after try n: Initial·2^(n-1) up to Max, with
// "equal jitter" (half of it fixed, half random), so replicas and
// receivers coming back do not see every sender at once.
func backoff(p Policy, n int) time.Duration {
	d := p.Initial
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	half := d / 2
	return half + rand.N(half+1)
}

// sleep waits d, calling beat(ctx, 0) at least every BeatEvery.
func sleep(ctx context.Context, d time.Duration, beat func(context.Context, int) error) error {
	for d > 0 {
		step := min(d, BeatEvery)
		t := time.NewTimer(step)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		d -= step
		if d > 0 && beat != nil {
			if err := beat(ctx, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// try posts once: retry says whether a failure may be tried again, after
// is the receiver's Retry-After (0: none).
func try(ctx context.Context, client *http.Client, rawURL string, body []byte, ids IDs, attempt int) (retry bool, after time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return false, 0, fmt.Errorf("webhook %s: %w", Redact(rawURL), err)
	}
	req.Header.Set("Content-Type", "application/json")
	if ids.Event != "" {
		req.Header.Set(HeaderEvent, ids.Event)
	}
	if ids.Delivery != "" {
		req.Header.Set(HeaderDelivery, ids.Delivery)
	}
	req.Header.Set(HeaderAttempt, strconv.Itoa(attempt))
	resp, err := client.Do(req)
	if err != nil {
		// The error names the URL, which may hold the secret: say less.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return ctx.Err() == nil, 0, fmt.Errorf("webhook %s: %w", Redact(rawURL), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 == 2 {
		return false, 0, nil
	}
	err = fmt.Errorf("webhook %s answered %s: %s", Redact(rawURL), resp.Status, strings.TrimSpace(string(msg)))
	switch c := resp.StatusCode; {
	case c == http.StatusTooManyRequests || c == http.StatusServiceUnavailable:
		return true, retryAfter(resp.Header.Get("Retry-After"), time.Now()), err
	case c == http.StatusRequestTimeout || c/100 == 5:
		return true, 0, err
	}
	return false, 0, err
}

// retryAfter reads a Retry-After header: seconds or an HTTP date (0: none
// or unreadable).
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Redact drops a URL's path and query (a webhook's secret) for messages.
func Redact(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Scheme + "://" + u.Host + "/…"
	}
	if len(raw) > 12 {
		return raw[:12] + "…"
	}
	return raw
}

// Tries is "1 try", "3 tries".
func Tries(n int) string {
	if n == 1 {
		return "1 try"
	}
	return strconv.Itoa(n) + " tries"
}
