// Package webhook delivers one JSON body to a webhook at least once, the
// way Alertmanager and Stripe do: every try of one delivery carries the
// same delivery id (header HeaderDelivery, and the caller puts it in the
// body) and the event's id (HeaderEvent), so a receiver de-duplicates;
// a connection error, a timeout, a 408, a 429 (honouring Retry-After) or a
// 5xx is tried again with exponential backoff and jitter for a bounded
// time (Policy.For); a 2xx ends it and is never tried again; any other
// answer (a 4xx: the URL or the body is wrong) is not tried again.
//
// It knows nothing of nightlies or stores: the caller records each try
// through Policy.Beat (report keeps notified.json and a Redis claim).
// It must not import anything of tunefleet's but internal helpers.
package webhook
