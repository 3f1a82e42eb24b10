package scalebench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/testkit/orttest"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
	"github.com/tunefleet/tunefleet/runstate"
)

// BenchmarkRSS measures the peak RSS of `producer bundle validate`,
// `producer submit` (to versitygw) and `worker run` taking the graph's task
// (its download and whatever it reads of the model), each a process of its
// own, on a generated model of SCALEBENCH_BIG_INLINE_MIB (default 1024)
// inside model.onnx plus SCALEBENCH_BIG_EXT_MIB (default 1024) of external
// data, against the same commands on the same bundle without those
// initializers. The peak is VmHWM, read by each process as it exits.
// The graph's one candidate is trt:fp16 on a machine without trtexec, so
// the worker fails it as unavailable right after the download: nothing
// loads the model into an engine, and the figure is the worker's own.
// Target: growth ≤ 64 MiB in each.
func BenchmarkRSS(b *testing.B) {
	orttest.Need(b)
	inline := int64(envInts("SCALEBENCH_BIG_INLINE_MIB", []int{1024})[0])
	ext := int64(envInts("SCALEBENCH_BIG_EXT_MIB", []int{1024})[0])
	start := time.Now()
	tiny, big := bigBundle(b, 0, 0), bigBundle(b, inline, ext)
	fmt.Printf("scalebench: rss: generated a %d MiB model (%d inline + %d external) in %v\n", inline+ext, inline, ext, time.Since(start).Round(time.Millisecond))

	redisSrv := testsvc.OwnRedis(b, testsvc.RedisOptions{})
	s3 := testsvc.OwnS3(b, testsvc.S3Options{})
	cfg := s3.Bucket(b)
	storeURL := fmt.Sprintf("s3://%s?endpoint=%s&region=%s", cfg.Bucket, cfg.Endpoint, cfg.Region)
	env := []string{"AWS_ACCESS_KEY_ID=" + cfg.AccessKey, "AWS_SECRET_ACCESS_KEY=" + cfg.SecretKey}
	rdb, err := runstate.ConnectRedis(context.Background(), redisSrv.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()

	type peaks struct{ validate, submit, worker int64 } // KiB
	measure := func(dir, queue string) peaks {
		var p peaks
		p.validate, _ = runCLI(b, env, 0, "producer", "bundle", "validate", dir)
		var out string
		p.submit, out = runCLI(b, env, 0, "producer", "submit", dir, "--redis", redisSrv.URL, "--store", storeURL,
			"--target", queue, "--allow-unserved", "--strategy", "first-wins", "--candidates", "trt:fp16", "--allow-trt-on-cpu", "-o", "json")
		var so struct {
			Submissions []jobs.Submission `json:"submissions"`
		}
		if err := json.Unmarshal([]byte(out), &so); err != nil || len(so.Submissions) != 1 {
			b.Fatalf("submit output %q: %v", out, err)
		}
		run := so.Submissions[0].Run
		p.worker = runWorkerUntil(b, env, func() bool {
			st, err := runstate.NewRuns(rdb).Get(context.Background(), run)
			return err == nil && st.Final()
		}, "worker", "run", "--redis", redisSrv.URL, "--store", storeURL, "--queues", queue, "--concurrency", "1")
		st, _ := runstate.NewRuns(rdb).Get(context.Background(), run)
		if g := st.Graphs["0"]; g.Status != runstate.GraphFailed || !strings.Contains(g.Class+g.Reason+g.Message, "unavailable") {
			fmt.Printf("scalebench: rss: note: graph 0 ended %+v (expected unavailable)\n", g)
		}
		return p
	}
	small := measure(tiny, "sb-rss-tiny")
	large := measure(big, "sb-rss-big")
	mib := func(kib int64) float64 { return float64(kib) / 1024 }
	g := func(a, b int64) float64 { return mib(b - a) }
	fmt.Printf("scalebench: rss peaks MiB, tiny → %d MiB model: validate %.0f → %.0f, submit %.0f → %.0f, worker %.0f → %.0f\n",
		inline+ext, mib(small.validate), mib(large.validate), mib(small.submit), mib(large.submit), mib(small.worker), mib(large.worker))
	worst := max(g(small.validate, large.validate), g(small.submit, large.submit), g(small.worker, large.worker))
	report(orderRSS, fmt.Sprintf("peak RSS growth, %d MiB model (%d inline + %d external): validate / submit / worker", inline+ext, inline, ext),
		fmt.Sprintf("+%.0f / +%.0f / +%.0f MiB", g(small.validate, large.validate), g(small.submit, large.submit), g(small.worker, large.worker)),
		"≤ 64 MiB each", ok(worst <= 64))
}

// command is this test binary started as a producer or worker command.
func command(env []string, role string, args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), cliEnv+"="+strings.Join(append([]string{role}, args...), "\x1f"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// hwmFile gives a command a file to write its peak RSS into.
func hwmFile(b *testing.B, cmd *exec.Cmd) string {
	f, err := os.CreateTemp(b.TempDir(), "hwm")
	if err != nil {
		b.Fatal(err)
	}
	f.Close()
	cmd.Env = append(cmd.Env, hwmEnv+"="+f.Name())
	return f.Name()
}

// readHWM reads what a finished command wrote (KiB); it fails if nothing.
func readHWM(b *testing.B, path string) int64 {
	raw, err := os.ReadFile(path)
	n, perr := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil || perr != nil || n <= 0 {
		b.Fatalf("no peak RSS in %s: %q %v %v", path, raw, err, perr)
	}
	return n
}

// runCLI runs a command to its end and returns its peak RSS (KiB) and
// stdout; it fails unless the command exits with want.
func runCLI(b *testing.B, env []string, want int, role string, args ...string) (int64, string) {
	b.Helper()
	cmd := command(env, role, args...)
	hwm := hwmFile(b, cmd)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != want {
		b.Fatalf("%s %s: %v\nstdout: %s\nstderr: %s", role, strings.Join(args, " "), err, out.String(), errb.String())
	}
	return readHWM(b, hwm), out.String()
}

// runWorkerUntil starts a worker process, waits until done says so (at
// most 10 minutes), stops it with SIGTERM and returns its peak RSS (KiB).
func runWorkerUntil(b *testing.B, env []string, done func() bool, role string, args ...string) int64 {
	b.Helper()
	cmd := command(env, role, args...)
	hwm := hwmFile(b, cmd)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := testsvc.StartProcess(cmd); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}()
	deadline := time.Now().Add(10 * time.Minute)
	for !done() {
		select {
		case <-exited:
			b.Fatalf("worker exited early: %s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("worker: the run did not end in 10 minutes: %s", log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(time.Minute):
		b.Fatalf("worker did not stop on SIGTERM: %s", log.String())
	}
	return readHWM(b, hwm)
}
