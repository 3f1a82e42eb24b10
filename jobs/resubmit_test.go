package jobs_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
)

// A forced re-run submits a bundle whose every file the store holds: no
// blob is written again. On a file store every blob keeps its inode and
// modification time (a rewrite is a new temporary file, fsynced and
// renamed over it); on S3 no PUT reaches a blob key (the requests are
// counted by an HTTP proxy in front of versitygw). Only the new run's
// run.json is written.
func TestForcedResubmitRewritesNoStoredBlob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, err := runstate.ConnectRedis(ctx, testsvc.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	b := open(t, threeGraphBundle(t))
	o := submitOptions(t, "max-throughput", "ort:cpu:basic")
	o.Force = true
	o.Target = "resubmit"

	t.Run("file", func(t *testing.T) {
		root := t.TempDir()
		store, err := artifacts.NewLocal(root)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		c := jobs.NewClient(rdb, store)
		defer c.Close()
		if _, err := c.Submit(ctx, b, o); err != nil {
			t.Fatal(err)
		}
		before := blobFiles(t, root)
		if len(before) == 0 {
			t.Fatal("the first submit stored no blob")
		}
		time.Sleep(20 * time.Millisecond) // a rewrite would show in the modification time
		if _, err := c.Submit(ctx, b, o); err != nil {
			t.Fatal(err)
		}
		after := blobFiles(t, root)
		if len(after) != len(before) {
			t.Errorf("the store holds %d blobs after the re-run, %d before", len(after), len(before))
		}
		for p, was := range before {
			if now, ok := after[p]; !ok || now != was {
				t.Errorf("blob %s was written again (inode, mtime %v → %v)", p, was, now)
			}
		}
	})

	t.Run("s3", func(t *testing.T) {
		cfg := testsvc.StartS3(t).Bucket(t)
		proxy := startRequestCounter(t, cfg.Endpoint)
		cfg.Endpoint = proxy.url
		store, err := artifacts.NewS3(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := jobs.NewClient(rdb, store)
		defer c.Close()
		if _, err := c.Submit(ctx, b, o); err != nil {
			t.Fatal(err)
		}
		if n := proxy.take()["PUT blob"]; n == 0 {
			t.Fatal("the first submit sent no blob")
		}
		if _, err := c.Submit(ctx, b, o); err != nil {
			t.Fatal(err)
		}
		got := proxy.take()
		if got["PUT blob"] != 0 || got["POST blob"] != 0 {
			t.Errorf("the re-run wrote %d blobs (%d multipart posts), want none; requests: %v", got["PUT blob"], got["POST blob"], got)
		}
		if got["PUT other"] != 1 {
			t.Errorf("the re-run wrote %d other objects, want 1 (its run.json); requests: %v", got["PUT other"], got)
		}
	})
}

// blobStat is what a rewrite of a blob file changes.
type blobStat struct {
	ino   uint64
	mtime time.Time
}

// blobFiles maps every blob file under a file store's root to its inode
// and modification time.
func blobFiles(t *testing.T, root string) map[string]blobStat {
	t.Helper()
	out := map[string]blobStat{}
	dir := filepath.Join(root, "blobs")
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = blobStat{ino: fi.Sys().(*syscall.Stat_t).Ino, mtime: fi.ModTime()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// requestCounter is an HTTP reverse proxy in front of S3 that counts
// requests by method and whether they name a blob: the requests the
// server really sees, whatever the client does (parts, retries).
type requestCounter struct {
	url    string
	mu     sync.Mutex
	counts map[string]int
}

func startRequestCounter(t *testing.T, target string) *requestCounter {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &requestCounter{url: "http://" + ln.Addr().String(), counts: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := "other"
		if strings.Contains(r.URL.Path, "/blobs/") {
			kind = "blob"
		}
		c.mu.Lock()
		c.counts[r.Method+" "+kind]++
		c.mu.Unlock()
		rp.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return c
}

// take returns the counts so far and starts again from zero.
func (c *requestCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = map[string]int{}
	return out
}
