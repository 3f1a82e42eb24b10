//go:build cluster

package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/jobs"
)

// kedaPollSeconds is the ScaledJobs' pollingInterval in the tier: the
// shipped 15 s would make "no Job through two polls" cost half a minute.
const kedaPollSeconds = 2

type scaledJob struct {
	Metadata meta `json:"metadata"`
	Spec     struct {
		PollingInterval int `json:"pollingInterval"`
		MaxReplicaCount int `json:"maxReplicaCount"`
		JobTargetRef    struct {
			Template struct {
				Metadata struct {
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
			} `json:"template"`
		} `json:"jobTargetRef"`
		Triggers []map[string]any `json:"triggers"`
	} `json:"spec"`
	Status struct {
		Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
	} `json:"status"`
}

// kedaFromZero runs KEDA's operator against the plane, where the gpu
// overlay is applied, with the ScaledJobs' Redis trigger pointed at a real
// redis-server (password from the Secret the TriggerAuthentication names):
// while the queue is empty KEDA polls it and creates no Job; once tasks are
// enqueued as the producer enqueues them, it creates one Job per task on
// the GPU class's ScaledJob, whose pods the Job controller creates and
// admission accepts at restricted, and no second Job for a task whose pod
// waits for a node (pendingPodConditions); the other class's ScaledJob
// stays at zero.
func kedaFromZero(t *testing.T, p *Plane) {
	start := time.Now()
	ctx := context.Background()
	pw := make([]byte, 12)
	rand.Read(pw)
	rds := testsvc.OwnRedis(t, testsvc.RedisOptions{Password: hex.EncodeToString(pw)})

	// The Secret the TriggerAuthentication reads: deploy/k8s references
	// it and never renders it (credentials.env.example).
	secret, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "tunefleet-credentials", "namespace": ns},
		"stringData": map[string]any{"TUNEFLEET_REDIS_PASSWORD": rds.Password},
	})
	if _, err := p.Apply(ctx, "Secret", ns, "tunefleet-credentials", secret); err != nil {
		t.Fatal(err)
	}

	// Every ScaledJob of the overlay, its Redis address moved to the
	// tier's redis-server (in a cluster, the Service's DNS name) and its
	// polling shortened; nothing else of the manifests changes.
	var list struct{ Items []scaledJob }
	p.Get(t, Resources["ScaledJob"].Path(ns, ""), &list)
	if len(list.Items) < 2 {
		t.Fatalf("%d ScaledJobs in %s: the gpu overlay has one per GPU class", len(list.Items), ns)
	}
	sjs := map[string]scaledJob{}
	for _, sj := range list.Items {
		for _, tr := range sj.Spec.Triggers {
			md, _ := tr["metadata"].(map[string]any)
			if tr["type"] != "redis" || md == nil || md["listName"] == nil {
				t.Fatalf("ScaledJob %s: trigger %v: want a redis trigger on a list", sj.Metadata.Name, tr)
			}
			md["address"] = rds.Addr
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"pollingInterval": kedaPollSeconds, "triggers": sj.Spec.Triggers}})
		code, b, err := p.Do(ctx, "PATCH", Resources["ScaledJob"].Path(ns, sj.Metadata.Name), "application/merge-patch+json", patch)
		if err != nil || code != 200 {
			t.Fatalf("patch ScaledJob %s: %d %s %v", sj.Metadata.Name, code, b, err)
		}
		sjs[sj.Metadata.Name] = sj
	}
	const l4 = "tunefleet-worker-gpu-l4"
	target, ok := sjs[l4]
	if !ok {
		t.Fatalf("no ScaledJob %s in the gpu overlay: %v", l4, keys(sjs))
	}
	class := target.Spec.JobTargetRef.Template.Metadata.Labels["tunefleet.io/class"]
	if class == "" {
		t.Fatalf("ScaledJob %s: its pod template has no tunefleet.io/class label", l4)
	}

	log := p.StartKEDA(t, ns)
	poll(t, 2*time.Minute, "KEDA's operator marking every ScaledJob Ready (its Redis trigger connected)", func() (bool, string) {
		var notes []string
		for name := range sjs {
			var sj scaledJob
			p.Get(t, Resources["ScaledJob"].Path(ns, name), &sj)
			ready := false
			for _, c := range sj.Status.Conditions {
				if c.Type == "Ready" {
					ready = c.Status == "True"
					notes = append(notes, fmt.Sprintf("%s: %s %s %s", name, c.Status, c.Reason, c.Message))
				}
			}
			if !ready {
				return false, strings.Join(notes, "; ")
			}
		}
		return true, ""
	})
	t.Logf("KEDA's operator (%s) up, its %d ScaledJobs Ready against redis-server %s (password from Secret tunefleet-credentials) in %s",
		KEDANamespace, len(sjs), rds.Addr, time.Since(start).Round(time.Millisecond))

	// An empty queue: through two of KEDA's polling intervals on the
	// class's ScaledJob, no Job.
	idle := twoIntervals(t, log, l4)
	if got := kedaJobs(t, p, ""); len(got) != 0 {
		t.Fatalf("KEDA created Jobs with every queue empty: %v", got)
	}
	rc := redis.NewClient(&redis.Options{Addr: rds.Addr, Password: rds.Password})
	defer rc.Close()
	read := evals(t, rc)
	if read == 0 {
		t.Fatalf("KEDA decided %s without reading Redis (no EVAL ran): its trigger is not on the tier's redis-server", idle)
	}
	t.Logf("empty queue %s: KEDA's operator made %s (Redis ran %d of its list-length scripts): no Job",
		jobs.Queue(class), idle, read)

	// Tasks arrive: tune:graph tasks on the class's queue, as the producer
	// enqueues them (type, payload, task ID, queue); no more than the
	// ScaledJob's maximum, so every task gets its Job.
	n := min(3, target.Spec.MaxReplicaCount)
	q := asynq.NewClientFromRedisClient(rc)
	run := "cluster-tier-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := range n {
		graph := strconv.Itoa(i)
		payload, _ := json.Marshal(jobs.GraphPayload{V: jobs.PayloadVersion, Run: run, Graph: graph, WorkKey: fmt.Sprintf("%064x", i), EnqueuedAt: time.Now().UTC()})
		if _, err := q.EnqueueContext(ctx, asynq.NewTask(jobs.TypeGraph, payload),
			asynq.Queue(jobs.Queue(class)), asynq.TaskID(jobs.GraphTaskID(run, graph))); err != nil {
			t.Fatalf("enqueue graph %s on %s: %v", graph, class, err)
		}
	}
	pending, err := asynq.NewInspectorFromRedisClient(rc).GetQueueInfo(jobs.Queue(class))
	if err != nil || pending.Pending != n {
		t.Fatalf("queue %s after enqueuing %d tasks: %+v, %v", class, n, pending, err)
	}
	arrived := time.Now()
	var created []string
	poll(t, 2*time.Minute, fmt.Sprintf("KEDA creating %d Jobs for %d tasks, each with a pod", n, n), func() (bool, string) {
		created = kedaJobs(t, p, l4)
		withPod := 0
		for _, j := range created {
			if len(jobPods(t, p, j)) > 0 {
				withPod++
			}
		}
		return len(created) == n && withPod == n, fmt.Sprintf("%d Jobs (%d with a pod): %v; %s", len(created), withPod, created, admissionRefusals(t, p))
	})
	if r := admissionRefusals(t, p); r != "" {
		t.Errorf("admission refused pods: %s", r)
	}
	var pods []string
	for _, j := range created {
		for _, pod := range jobPods(t, p, j) {
			pods = append(pods, pod.Metadata.Name+" "+pod.Status.Phase)
		}
	}
	t.Logf("KEDA creating Jobs from an empty start when tasks arrive: %d tasks on queue %s → %d Jobs of ScaledJob %s in %s (max %d); pods admitted at restricted: %s",
		n, jobs.Queue(class), len(created), l4, time.Since(arrived).Round(time.Millisecond), target.Spec.MaxReplicaCount, strings.Join(pods, ", "))

	// Two more polling intervals with the tasks still queued and every pod
	// waiting for a node: no second Job for the same task, none for
	// another class.
	busy := twoIntervals(t, log, l4)
	if again := kedaJobs(t, p, l4); len(again) != n {
		t.Errorf("after two more polls with %d tasks queued and their pods pending: %d Jobs %v, want %d (pendingPodConditions)", n, len(again), again, n)
	}
	for name := range sjs {
		if name != l4 {
			if other := kedaJobs(t, p, name); len(other) != 0 {
				t.Errorf("ScaledJob %s, whose queue is empty: Jobs %v", name, other)
			}
		}
	}
	t.Logf("then %s more: still %d Jobs (their pods, pending, count against the queue), none for the other classes' ScaledJobs; KEDA's part took %s",
		busy, n, time.Since(start).Round(time.Millisecond))
	if errs := logErrors(log.String()); len(errs) > 0 {
		t.Errorf("KEDA's operator logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// twoIntervals waits until KEDA's operator has logged three scaling
// decisions for ScaledJob name after the call, spanning two polling
// intervals (the operator also decides at once on a reconcile, so a count
// alone could be two decisions in the same instant), and says how many and
// over how long.
func twoIntervals(t *testing.T, log *testsvc.SyncBuffer, name string) string {
	t.Helper()
	was := len(decisions(log.String(), name))
	var span time.Duration
	var n int
	poll(t, time.Minute, fmt.Sprintf("KEDA's decisions for %s through two polling intervals", name), func() (bool, string) {
		ts := decisions(log.String(), name)[was:]
		if n = len(ts); n > 0 {
			span = ts[n-1].Sub(ts[0])
		}
		// Three decisions, two intervals apart give or take the
		// operator's timer: not two at once from a reconcile.
		return n >= 3 && span >= 3*kedaPollSeconds*time.Second/2, fmt.Sprintf("%d decisions over %s", n, span)
	})
	return fmt.Sprintf("%d scaling decisions over %s (pollingInterval %ds)", n, span.Round(time.Millisecond), kedaPollSeconds)
}

// kedaLine is a line of KEDA's operator log (zap, JSON, RFC 3339 times:
// StartKEDA's flags).
type kedaLine struct {
	Level     string    `json:"level"`
	TS        time.Time `json:"ts"`
	Msg       string    `json:"msg"`
	ScaledJob string    `json:"scaledJob.Name"`
	// Pending is logged once per scaling decision of a ScaledJob
	// (RequestJobScale in KEDA's pkg/scaling/executor), queue empty or not.
	Pending *int `json:"Number of pending Jobs"`
}

func kedaLines(log string) []kedaLine {
	var out []kedaLine
	for _, s := range strings.Split(log, "\n") {
		var l kedaLine
		if json.Unmarshal([]byte(s), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// decisions are the times of KEDA's scaling decisions for ScaledJob name.
func decisions(log, name string) []time.Time {
	var out []time.Time
	for _, l := range kedaLines(log) {
		if l.ScaledJob == name && l.Pending != nil {
			out = append(out, l.TS)
		}
	}
	return out
}

// logErrors are the error lines of KEDA's operator log.
func logErrors(log string) []string {
	var out []string
	for _, s := range strings.Split(log, "\n") {
		var l kedaLine
		if json.Unmarshal([]byte(s), &l) == nil && l.Level == "error" {
			out = append(out, s)
		}
	}
	return out
}

// kedaJobs lists the Jobs KEDA created for ScaledJob name ("" for any).
func kedaJobs(t *testing.T, p *Plane, name string) []string {
	t.Helper()
	sel := "scaledjob.keda.sh/name"
	if name != "" {
		sel += "%3D" + name
	}
	var list struct{ Items []struct{ Metadata meta } }
	p.Get(t, Resources["Job"].Path(ns, "")+"?labelSelector="+sel, &list)
	var out []string
	for _, j := range list.Items {
		out = append(out, j.Metadata.Name)
	}
	sort.Strings(out)
	return out
}

// evals is how many EVALs redis-server ran: KEDA's redis scaler reads a
// list's length with a script.
func evals(t *testing.T, rc *redis.Client) int {
	t.Helper()
	info, err := rc.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("redis INFO commandstats: %v", err)
	}
	m := regexp.MustCompile(`(?m)^cmdstat_eval:calls=(\d+)`).FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
