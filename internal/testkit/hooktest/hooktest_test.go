package hooktest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tunefleet/tunefleet/internal/testkit/hooktest"
)

func TestReceiverKeepsEveryBody(t *testing.T) {
	url, bodies := hooktest.Receiver(t)
	for _, b := range []string{`{"text":"a"}`, `{"text":"b"}`} {
		resp, err := http.Post(url, "application/json", strings.NewReader(b))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("post: %v, %v", resp, err)
		}
		resp.Body.Close()
	}
	if got := bodies(); len(got) != 2 || got[0] != `{"text":"a"}` || got[1] != `{"text":"b"}` {
		t.Errorf("bodies %q", got)
	}
}
