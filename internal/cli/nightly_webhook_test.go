package cli_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/hooktest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/state"
)

// failedPlan writes a plan whose one entry could not be submitted (news
// for the webhook) into the local store at dir.
func failedPlan(t *testing.T, dir, id string) {
	t.Helper()
	store, err := artifacts.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := state.Plan{Format: state.PlanFormat, Nightly: id, FleetDigest: "sha256:" + strings.Repeat("ab", 32), CreatedAt: time.Now().UTC(),
		Entries: []state.PlanEntry{{Model: "m", Target: "cpu", Outcome: state.OutcomeFailed, Error: "bundle missing"}}}
	if err := artifacts.PutJSON(context.Background(), store, state.PlanKey(id), p); err != nil {
		t.Fatal(err)
	}
}

// TestNightlyReportResendWithRedis: `nightly report --notify URL` with
// --redis delivers once, says already_sent after, and --resend delivers
// again with a new delivery id of the same event. (On main the Redis
// claim lived 90 days: every later report said already_sent, and the
// documented resend, deleting notified.json, did nothing.)
func TestNightlyReportResendWithRedis(t *testing.T) {
	dir := t.TempDir()
	id := "2026-12-01-0123456789ab"
	failedPlan(t, dir, id)
	redisURL := testsvc.OwnRedis(t, testsvc.RedisOptions{}).URL
	hook, bodies := hooktest.Receiver(t)
	args := []string{"nightly", "report", id, "--store", "file://" + dir, "--redis", redisURL, "--notify", hook}

	first := producer(t, args...)
	first.wantCode(t, cli.ExitOK)
	if !strings.Contains(first.stdout, "webhook: sent: delivered at") {
		t.Errorf("first report:\n%s", first)
	}
	again := producer(t, args...)
	again.wantCode(t, cli.ExitOK)
	if !strings.Contains(again.stdout, "webhook: already_sent (--resend sends it again)") {
		t.Errorf("second report:\n%s", again)
	}
	resent := producer(t, append(args, "--resend", "-o", "json")...)
	resent.wantCode(t, cli.ExitOK)
	var out struct {
		Webhook  string         `json:"webhook"`
		Delivery map[string]any `json:"webhook_delivery"`
	}
	if err := json.Unmarshal([]byte(resent.stdout), &out); err != nil || out.Webhook != "sent" || out.Delivery["delivery"] != "delivered" || out.Delivery["resends"] != float64(1) {
		t.Fatalf("--resend -o json: %v\n%s", err, resent)
	}
	got := bodies()
	if len(got) != 2 {
		t.Fatalf("receiver got %d posts, want 2: %q", len(got), got)
	}
	type ids struct {
		EventID    string `json:"event_id"`
		DeliveryID string `json:"delivery_id"`
	}
	var a, b ids
	json.Unmarshal([]byte(got[0]), &a)
	json.Unmarshal([]byte(got[1]), &b)
	if a.DeliveryID == "" || a.DeliveryID == b.DeliveryID || a.EventID != b.EventID || a.EventID == "" {
		t.Errorf("deliveries %+v and %+v: want one event, two delivery ids", a, b)
	}
}

// TestNightlyReportDeliveryFailed: a receiver that stays down for the
// whole --notify-retry-for window: the report is still written and
// printed, saying the delivery failed and why, and the exit is 3 (a
// service); a bad window is refused (exit 2).
func TestNightlyReportDeliveryFailed(t *testing.T) {
	dir := t.TempDir()
	id := "2026-12-01-0123456789ac"
	failedPlan(t, dir, id)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String() + "/hooks/T/B/X"
	l.Close()
	args := []string{"nightly", "report", id, "--store", "file://" + dir, "--notify", down}
	o := producer(t, append(args, "--notify-retry-for", "300ms")...)
	o.wantCode(t, cli.ExitInternal)
	if !strings.Contains(o.stdout, "webhook: failed: NOT delivered") || !strings.Contains(o.stdout, "connection refused") ||
		!strings.HasPrefix(o.stderr, "producer: webhook of nightly "+id+" not delivered") || strings.Contains(o.stdout+o.stderr, "/hooks/T/B/X") {
		t.Errorf("a failed delivery:\n%s", o)
	}
	producer(t, append(args, "--notify-retry-for", "0s")...).wantError(t, "producer", cli.ExitUsage, "--notify-retry-for 0s: want a positive duration")
	t.Setenv(cli.NotifyRetryForEnv, "soon")
	producer(t, args...).wantError(t, "producer", cli.ExitUsage, `$TUNEFLEET_NOTIFY_RETRY_FOR "soon": want a positive duration`)
}
