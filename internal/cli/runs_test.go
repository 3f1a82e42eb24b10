package cli_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/internal/cli"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
)

// `producer runs --model X` for an X no model's name holds (a typo) says
// so, with the name it may have meant, from the names of the models with
// runs; a name that matches lists its runs and says nothing more.
func TestRunsDidYouMeanModel(t *testing.T) {
	url, runs := testRuns(t)
	model := fmt.Sprintf("demo_model_%d", time.Now().UnixNano()%100000)
	for i := range 3 {
		if _, err := runs.Create(context.Background(), fmt.Sprintf("%s-%d", model, i), model, "cpu", []string{"0"}); err != nil {
			t.Fatal(err)
		}
	}
	typo := strings.Replace(model, "model", "modle", 1)
	o := producer(t, "runs", "--redis", url, "--model", typo)
	o.wantCode(t, cli.ExitOK)
	if want := fmt.Sprintf("no model with runs in Redis has a name like %q; did you mean %s?\n", typo, model); o.stderr != want {
		t.Errorf("runs --model %s: stderr %q, want %q", typo, o.stderr, want)
	}
	o = producer(t, "runs", "--redis", url, "--model", model[:len(model)-1])
	o.wantCode(t, cli.ExitOK)
	if o.stderr != "" || strings.Count(o.stdout, model+"-") != 3 {
		t.Errorf("runs by part of the name: want its 3 runs and nothing on stderr: %s", o)
	}
	// -o json is only JSON: no note.
	o = producer(t, "runs", "--redis", url, "--model", typo, "-o", "json")
	if o.code != cli.ExitOK || o.stderr != "" {
		t.Errorf("runs -o json of an unknown model: %s", o)
	}
}

// testRuns is a redis-server of the test's and the run bookkeeping over
// it, for tests that make runs without tuning anything.
func testRuns(t *testing.T) (string, *runstate.Runs) {
	t.Helper()
	url := testsvc.Redis(t)
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	return url, runstate.NewRuns(rdb)
}
