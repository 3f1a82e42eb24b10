package artifacts_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/state"
)

// BenchmarkTransferRatios measures tunefleet's transfers against bare
// minio-go on the same versitygw, interleaved, one round per iteration, and
// prints the ratios of the medians (≥ 1 is as fast as bare minio-go):
//
//	upload    PutFileAs (what producer submit and workers use) vs FPutObject
//	download  FetchFile (what a worker's materialize uses) vs FGetObject
//	fetch     Fetch of a state with two engines vs FGetObject of each
//	submit    600 small files (a 200-graph bundle) one by one as submit did
//	          before (HEAD, then PUT), vs PutFiles, with the requests each sends
//
// The blob is TUNEFLEET_BENCH_MIB MiB (default 256), random, written under
// the benchmark's temporary directory and removed after:
//
//	go test -run '^$' -bench TransferRatios -benchtime 3x ./artifacts/
func BenchmarkTransferRatios(b *testing.B) {
	mib := int64(256)
	if v := os.Getenv("TUNEFLEET_BENCH_MIB"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			b.Fatalf("TUNEFLEET_BENCH_MIB=%q: want a positive number of MiB", v)
		}
		mib = n
	}
	srv := testsvc.StartS3(b)
	cfg := srv.Bucket(b)
	var reqs atomic.Int64
	var heads, puts, gets atomic.Int64
	s, err := artifacts.NewS3WithTransport(cfg, func(rt http.RoundTripper) http.RoundTripper {
		return countingRT{rt: rt, n: &reqs, heads: &heads, puts: &puts, gets: &gets}
	})
	if err != nil {
		b.Fatal(err)
	}
	bare, err := minio.New(strings.TrimPrefix(cfg.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""), Region: cfg.Region,
	})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	path, ref := randomFile(b, dir, mib<<20)
	ctx := b.Context()

	type row struct {
		name       string
		ours, base []time.Duration
		note       string
	}
	var rows []*row
	measure := func(name string, ours, base func() error) *row {
		r := &row{name: name}
		rows = append(rows, r)
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				for _, m := range []struct {
					fn  func() error
					out *[]time.Duration
				}{{base, &r.base}, {ours, &r.ours}} {
					start := time.Now()
					if err := m.fn(); err != nil {
						b.Fatal(err)
					}
					*m.out = append(*m.out, time.Since(start))
				}
			}
		})
		return r
	}

	measure("upload", func() error {
		if err := s.Delete(ctx, ref.Key()); err != nil {
			return err
		}
		_, err := artifacts.PutFileAs(ctx, s, path, ref)
		return err
	}, func() error {
		_, err := bare.FPutObject(ctx, cfg.Bucket, "bare/upload", path, minio.PutObjectOptions{})
		return err
	})
	dl := filepath.Join(dir, "dl")
	measure("download", func() error {
		os.Remove(dl)
		return artifacts.FetchFile(ctx, s, ref, dl)
	}, func() error {
		os.Remove(dl)
		return bare.FGetObject(ctx, cfg.Bucket, ref.Key(), dl, minio.GetObjectOptions{})
	})

	// A state of two engines, half the size each.
	half := filepath.Join(dir, "half")
	hp, href := randomFile(b, dir, mib<<19)
	if err := os.Rename(hp, half); err != nil {
		b.Fatal(err)
	}
	if _, err := artifacts.PutFileAs(ctx, s, half, href); err != nil {
		b.Fatal(err)
	}
	st := state.State{Format: state.StateFormat, Model: "m", Platform: "p", Target: "p", Run: "r", Status: "done"}
	for _, g := range []string{"0", "1"} {
		r := ref
		if g == "1" {
			r = href
		}
		st.Graphs = append(st.Graphs, state.StateGraph{Name: g, Engine: &state.EngineRef{Key: r.Key(), File: "model.plan", SHA256: r.SHA256, Size: r.Size}})
	}
	if err := artifacts.PutJSON(ctx, s, artifacts.StateKey("r"), st); err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(dir, "fetched")
	measure("fetch", func() error {
		os.RemoveAll(out)
		_, err := artifacts.Fetch(ctx, s, "m", "p", "r", out)
		return err
	}, func() error {
		os.RemoveAll(out)
		for i, g := range st.Graphs {
			if err := bare.FGetObject(ctx, cfg.Bucket, g.Engine.Key, filepath.Join(out, strconv.Itoa(i)), minio.GetObjectOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
	os.RemoveAll(out)
	os.Remove(dl)

	// 600 small files: a 200-graph bundle's ONNX, inputs and outputs.
	small := filepath.Join(dir, "small")
	if err := os.Mkdir(small, 0o755); err != nil {
		b.Fatal(err)
	}
	var before, after string
	round := 0
	newFiles := func() []artifacts.FileBlob {
		round++
		files := make([]artifacts.FileBlob, 600)
		for i := range files {
			p, r := randomFile(b, small, int64(4<<10+i*16))
			files[i] = artifacts.FileBlob{Path: p, Ref: r}
		}
		return files
	}
	count := func(fn func() error) (string, error) {
		reqs.Store(0)
		heads.Store(0)
		puts.Store(0)
		gets.Store(0)
		err := fn()
		return fmt.Sprintf("%d requests: %d HEAD, %d GET, %d PUT", reqs.Load(), heads.Load(), gets.Load(), puts.Load()), err
	}
	var sf []artifacts.FileBlob
	r := measure("submit-600-files", func() error {
		var err error
		after, err = count(func() error { return artifacts.PutFiles(ctx, s, sf, artifacts.DefaultPutConcurrency) })
		return err
	}, func() error {
		sf = newFiles() // fresh contents: nothing is stored yet
		var err error
		before, err = count(func() error {
			// As submit did before: one file at a time, a HEAD for the
			// blob and, when missing, a PUT.
			for _, f := range sf {
				if _, err := s.Stat(ctx, f.Ref.Key()); err == nil {
					continue
				}
				fh, err := os.Open(f.Path)
				if err != nil {
					return err
				}
				err = s.Put(ctx, f.Ref.Key(), fh, f.Ref.Size)
				fh.Close()
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			sf = newFiles()
		}
		return err
	})
	r.note = fmt.Sprintf("one by one: %s; PutFiles: %s", before, after)

	fmt.Printf("transfer ratios, %d MiB blob, versitygw on loopback (median of %d interleaved rounds; ratio = bare time / ours):\n", mib, len(rows[0].ours))
	for _, r := range rows {
		o, bt := median(r.ours), median(r.base)
		label := "bare minio-go"
		if r.name == "submit-600-files" {
			label = "one by one"
		}
		fmt.Printf("  %-17s ours %8v   %s %8v   ratio %.2f×  %s\n", r.name, o.Round(time.Millisecond), label, bt.Round(time.Millisecond), float64(bt)/float64(o), r.note)
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// countingRT counts the requests that go through it, by method.
type countingRT struct {
	rt                   http.RoundTripper
	n, heads, puts, gets *atomic.Int64
}

func (c countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	switch r.Method {
	case http.MethodHead:
		c.heads.Add(1)
	case http.MethodPut:
		c.puts.Add(1)
	case http.MethodGet:
		c.gets.Add(1)
	}
	return c.rt.RoundTrip(r)
}
