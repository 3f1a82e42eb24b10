package scalebench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/backend"
	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/internal/testkit/bundletest"
	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/ort"
	"github.com/tunefleet/tunefleet/runstate"
	"github.com/tunefleet/tunefleet/strategy"
)

// BenchmarkSubmitS3 times `producer submit`'s work (jobs.Client.Submit:
// hash, upload, run.json, enqueue) of a 200-graph bundle into a fresh
// versitygw bucket, and counts its S3 requests at the HTTP level (a proxy).
// Beside it, in the same run, on the same server and through the same
// proxy, the same files go up one by one with bare minio-go PutObject: what
// a sequential uploader costs. Three rounds, alternating, a new bucket for
// each; medians. Target: submit ≤ 0.2× the sequential upload (issue 9:
// uploads concurrent, ≥ 5× faster than its 601 HEAD + 602 PUT in
// sequence).
//
// It is measured twice: on loopback, where versitygw and the client share
// this machine's cores and a request costs CPU, not waiting, so
// concurrency can only spread the work over the cores; and with a link of
// a few milliseconds per round trip (testsvc.Proxy's latency), what S3 in
// a data center or a neighbouring region costs, where the target applies.
func BenchmarkSubmitS3(b *testing.B) {
	orttest.Need(b)
	const n = 200
	kinds := make([]bundletest.Kind, n)
	for i := range kinds {
		kinds[i] = bundletest.MLP
	}
	// 200 graphs of one MLP: one ONNX file's bytes, and one sample of its
	// own per graph (values keyed by the graph's name): 601 files, as in
	// the measurement.
	dir := bundletest.Write(b, bundletest.WithModel("sb.submit"), bundletest.WithGraphs(kinds...), bundletest.WithSamples(4))
	bun, err := bundle.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	files, err := bun.Files()
	if err != nil {
		b.Fatal(err)
	}
	srv := testsvc.OwnS3(b, testsvc.S3Options{})
	rdb := testsvc.OwnRedis(b, testsvc.RedisOptions{})
	ctx := context.Background()
	r, err := runstate.ConnectRedis(ctx, rdb.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for _, link := range []struct {
		name    string
		latency time.Duration
	}{{"loopback", 0}, {"2 ms each way", 2 * time.Millisecond}} {
		b.Run(strings.ReplaceAll(link.name, " ", "-"), func(b *testing.B) {
			submitS3(b, srv, r, bun, files, link.name, link.latency)
		})
	}
}

func submitS3(b *testing.B, srv *testsvc.S3Server, r redis.UniversalClient, bun *bundle.Bundle, files []bundle.FileDigest, link string, latency time.Duration) {
	const n = 200
	ctx := context.Background()
	strat, _ := strategy.Parse(strategy.FirstWins, 0)
	cands, _ := backend.ParseCandidates("ort:cpu:basic")
	endpoint, _ := url.Parse(srv.Config("").Endpoint)
	slow := testsvc.StartProxy(b, endpoint.Host)
	slow.SetLatency(latency)
	var subs, bare []time.Duration
	var counts map[string]int
	for round := range 3 {
		cfg := srv.Bucket(b)
		proxy := startCountingProxy(b, "http://"+slow.Addr)
		cfg.Endpoint = proxy.URL
		store, err := artifacts.NewS3(cfg)
		if err != nil {
			b.Fatal(err)
		}
		c := jobs.NewClient(r, store)
		proxy.reset()
		start := time.Now()
		if _, err := c.Submit(ctx, bun, jobs.SubmitOptions{Target: fmt.Sprintf("sb-submit-%d", round), Strategy: strat,
			Candidates: cands, Backends: backend.Registry{"ort": ort.New(ort.Options{})}, Force: true}); err != nil {
			b.Fatal(err)
		}
		subs = append(subs, time.Since(start))
		counts = proxy.reset()
		c.Close()

		bcfg := srv.Bucket(b)
		u, _ := url.Parse(proxy.URL)
		mc, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(bcfg.AccessKey, bcfg.SecretKey, ""), Region: bcfg.Region})
		if err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		for _, f := range files {
			fh, err := os.Open(filepath.Join(bun.Dir, filepath.FromSlash(f.Path)))
			if err != nil {
				b.Fatal(err)
			}
			_, err = mc.PutObject(ctx, bcfg.Bucket, "blobs/sha256/"+f.SHA256, fh, f.Size, minio.PutObjectOptions{})
			fh.Close()
			if err != nil {
				b.Fatal(err)
			}
		}
		bare = append(bare, time.Since(start))
	}
	s, q := medianDur(subs), medianDur(bare)
	ratio := float64(s) / float64(q)
	fmt.Printf("scalebench: submit of %d graphs (%d files) to S3 over %s: %v (bare sequential PutObject %v); requests of the last: %s\n",
		n, len(files), link, roundAll(subs), roundAll(bare), describe(counts))
	var met *bool
	if latency > 0 {
		met = ok(ratio <= 0.2)
	}
	order := orderSubmitS3
	if latency > 0 {
		order = orderSubmitS3Slow
	}
	report(order, fmt.Sprintf("`producer submit` of %d graphs to S3 (%d files), %s", n, len(files), link),
		fmt.Sprintf("%v = %.2f× sequential PutObject (%v); %d HEAD + %d PUT + %d GET",
			s.Round(time.Millisecond), ratio, q.Round(time.Millisecond), sum(counts, "HEAD"), sum(counts, "PUT"), sum(counts, "GET")),
		"≤ 0.20× (concurrent uploads)", met)
}
