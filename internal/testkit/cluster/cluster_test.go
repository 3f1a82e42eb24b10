//go:build cluster

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/tunefleet/tunefleet/internal/testkit/deploycheck"
)

const ns = "tunefleet"

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// kbuild builds the kustomize renderer deploycheck uses (a process of its
// own: see its doc).
func kbuild(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "kbuild")
	if b, err := exec.Command("go", "build", "-o", out, "github.com/tunefleet/tunefleet/internal/testkit/deploycheck/kbuild").CombinedOutput(); err != nil {
		t.Fatalf("go build kbuild: %v\n%s", err, b)
	}
	return out
}

type meta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace"`
	ResourceVersion   string            `json:"resourceVersion"`
	UID               string            `json:"uid"`
	Labels            map[string]string `json:"labels"`
	OwnerReferences   []struct{ Kind, Name string }
	DeletionTimestamp *string `json:"deletionTimestamp"`
}

type podList struct {
	Items []struct {
		Metadata meta `json:"metadata"`
		Status   struct {
			Phase string `json:"phase"`
		} `json:"status"`
	} `json:"items"`
}

type eventList struct {
	Items []struct {
		Reason, Message string
		InvolvedObject  struct{ Kind, Name string } `json:"involvedObject"`
	} `json:"items"`
}

// TestControlPlane applies every overlay server-side to a real control
// plane, re-applies it (nothing may change), and checks that the
// controllers create pods that Pod Security admission accepts at
// restricted; then it triggers the nightly, fails its pod with the exit
// code for bad input (the Job ends at once, one pod) and with the one for
// an unreachable service (the Job makes another pod), and shows a GPU Job
// whose pod never gets a node removed by its deadline.
func TestControlPlane(t *testing.T) {
	start := time.Now()
	root := repoRoot(t)
	p := Start(t)
	t.Logf("control plane up in %s", time.Since(start).Round(time.Millisecond))
	ctx := context.Background()

	// KEDA's CRDs (v2.21.0, deploycheck's vendored copies), then wait for
	// them to be served.
	crds, _ := filepath.Glob(filepath.Join(root, "internal/testkit/deploycheck/testdata/keda/*.yaml"))
	for _, f := range crds {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var m struct{ Metadata meta }
		if err := sigsyaml.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Apply(ctx, "CustomResourceDefinition", "", m.Metadata.Name, doc); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, time.Minute, "KEDA's ScaledJob served", func() (bool, string) {
		code, b, err := p.Do(ctx, "GET", Resources["ScaledJob"].Path(ns, ""), "", nil)
		return err == nil && (code == 200 || code == 404 && strings.Contains(string(b), "namespaces")), fmt.Sprintf("%d %s %v", code, b, err)
	})

	kb := kbuild(t)
	overlays := []string{"cpu-only", "gpu", "gpu-redis-cluster", "gpu-redis-sentinel"}
	for _, o := range overlays {
		objs, err := deploycheck.Build(kb, filepath.Join(root, "deploy/k8s/overlays", o))
		if err != nil {
			t.Fatalf("render %s: %v", o, err)
		}
		applied := map[string]string{}
		apply := func(round string, compare bool) {
			for _, obj := range objs {
				var m struct{ Metadata meta }
				json.Unmarshal(obj.JSON, &m)
				namespace := m.Metadata.Namespace
				if namespace == "" {
					namespace = ns
				}
				out, err := p.Apply(ctx, obj.Kind, namespace, obj.Name, obj.JSON)
				if err != nil {
					t.Errorf("overlay %s, %s: %v", o, round, err)
					continue
				}
				now, key := kept(out), obj.String()
				if was, ok := applied[key]; compare && ok && was != now {
					t.Errorf("overlay %s: re-applying %s changed it:\nbefore %s\nafter  %s", o, key, was, now)
				}
				applied[key] = now
			}
		}
		apply("apply", false)
		// Controllers write status and a few annotations of their own
		// (a Deployment's revision) after the first apply: let them, then
		// take what the server keeps and apply again, which must change
		// nothing.
		time.Sleep(3 * time.Second)
		apply("apply after the controllers' first writes", false)
		apply("re-apply", true)
		t.Logf("overlay %s: %d objects applied server-side and admitted; re-applied, none changed", o, len(objs))
	}
	// The rest is checked on the gpu overlay, applied again last.
	objs, err := deploycheck.Build(kb, filepath.Join(root, "deploy/k8s/overlays/gpu"))
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if _, err := p.Apply(ctx, obj.Kind, ns, obj.Name, obj.JSON); err != nil {
			t.Fatal(err)
		}
	}

	// Pods from the ReplicaSet (Deployments) and StatefulSet controllers,
	// admitted at restricted (the namespace enforces it).
	var labels map[string]string
	var nsObj struct{ Metadata meta }
	p.Get(t, "/api/v1/namespaces/"+ns, &nsObj)
	labels = nsObj.Metadata.Labels
	if labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Fatalf("namespace %s labels %v: want pod-security.kubernetes.io/enforce=restricted", ns, labels)
	}
	want := map[string]bool{"tunefleet-worker-cpu": false, "tunefleet-web": false, "tunefleet-redis": false}
	poll(t, 2*time.Minute, "pods of every Deployment and StatefulSet", func() (bool, string) {
		var pods podList
		p.Get(t, "/api/v1/namespaces/"+ns+"/pods", &pods)
		for _, pod := range pods.Items {
			for w := range want {
				if strings.HasPrefix(pod.Metadata.Name, w+"-") {
					want[w] = true
				}
			}
		}
		done := true
		for _, ok := range want {
			done = done && ok
		}
		return done, fmt.Sprintf("%v; %s", want, admissionRefusals(t, p))
	})
	if r := admissionRefusals(t, p); r != "" {
		t.Errorf("admission refused pods: %s", r)
	}
	t.Logf("pods created by the ReplicaSet and StatefulSet controllers and admitted at restricted: %v", want)

	// The nightly, triggered as `kubectl create job --from=cronjob/…` does.
	var cj map[string]any
	p.Get(t, Resources["CronJob"].Path(ns, "tunefleet-nightly"), &cj)
	nightly := func(name string) string {
		job := map[string]any{
			"apiVersion": "batch/v1", "kind": "Job",
			"metadata": map[string]any{"name": name, "namespace": ns,
				"annotations": map[string]any{"cronjob.kubernetes.io/instantiate": "manual"}},
			"spec": cj["spec"].(map[string]any)["jobTemplate"].(map[string]any)["spec"],
		}
		b, _ := json.Marshal(job)
		if _, err := p.Apply(ctx, "Job", ns, name, b); err != nil {
			t.Fatal(err)
		}
		return waitPod(t, p, name)
	}
	bad := nightly("nightly-bad-input")
	t.Logf("nightly Job nightly-bad-input: the Job controller created pod %s, admitted", bad)
	failPod(t, p, bad, "nightly", 2)
	cond := waitJobFailed(t, p, "nightly-bad-input")
	if cond != "PodFailurePolicy" {
		t.Errorf("nightly failed with exit 2 (bad input): Job condition reason %q, want PodFailurePolicy (failed at once)", cond)
	}
	time.Sleep(3 * time.Second)
	if n := len(jobPods(t, p, "nightly-bad-input")); n != 1 {
		t.Errorf("nightly failed with exit 2: %d pods, want 1 (no retry of a deterministic failure)", n)
	}
	t.Logf("nightly exit 2 (bad input): Job failed (%s) with 1 pod", cond)

	infra := nightly("nightly-redis-down")
	failPod(t, p, infra, "nightly", 3)
	poll(t, time.Minute, "a second pod after exit 3 (a service unreachable: retried)", func() (bool, string) {
		n := len(jobPods(t, p, "nightly-redis-down"))
		return n >= 2, fmt.Sprintf("%d pods", n)
	})
	t.Logf("nightly exit 3 (service unreachable): the Job controller started another pod (backoffLimit)")

	// A GPU Job (as KEDA creates it from the ScaledJob) whose pod never
	// gets a node: its deadline removes it. The shipped deadline is 3 h;
	// the tier shortens it to show what the Job controller does.
	var sj map[string]any
	p.Get(t, Resources["ScaledJob"].Path(ns, "tunefleet-worker-gpu-l4"), &sj)
	spec := sj["spec"].(map[string]any)["jobTargetRef"].(map[string]any)
	if d, _ := spec["activeDeadlineSeconds"].(float64); d <= 0 {
		t.Fatalf("ScaledJob tunefleet-worker-gpu-l4 as the server keeps it has no activeDeadlineSeconds: %v", spec)
	}
	spec["activeDeadlineSeconds"] = 5
	job := map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "gpu-l4-pending", "namespace": ns}, "spec": spec}
	b, _ := json.Marshal(job)
	if _, err := p.Apply(ctx, "Job", ns, "gpu-l4-pending", b); err != nil {
		t.Fatal(err)
	}
	pending := waitPod(t, p, "gpu-l4-pending")
	if cond := waitJobFailed(t, p, "gpu-l4-pending"); cond != "DeadlineExceeded" {
		t.Errorf("pending GPU Job: condition reason %q, want DeadlineExceeded", cond)
	}
	poll(t, time.Minute, "the pending GPU pod removed", func() (bool, string) {
		for _, pod := range jobPods(t, p, "gpu-l4-pending") {
			if pod.Metadata.DeletionTimestamp == nil && pod.Status.Phase == "Pending" {
				return false, pod.Metadata.Name + " still pending"
			}
		}
		return true, ""
	})
	t.Logf("GPU Job gpu-l4-pending: pod %s Pending with no node; the Job failed DeadlineExceeded and its pod went", pending)

	// KEDA's operator on the gpu overlay's ScaledJobs and a real Redis.
	kedaFromZero(t, p)
	t.Logf("cluster tier passed in %s", time.Since(start).Round(time.Millisecond))
}

// kept is an object as the server keeps it, less what changes without a
// change of ours (status, resourceVersion, managedFields' timestamps).
func kept(obj map[string]any) string {
	delete(obj, "status")
	if m, ok := obj["metadata"].(map[string]any); ok {
		delete(m, "resourceVersion")
		delete(m, "managedFields")
	}
	b, _ := json.Marshal(obj)
	return string(b)
}

// admissionRefusals are the controllers' FailedCreate events: a pod
// template admission refused.
func admissionRefusals(t *testing.T, p *Plane) string {
	var ev eventList
	p.Get(t, "/api/v1/namespaces/"+ns+"/events", &ev)
	var out []string
	for _, e := range ev.Items {
		if e.Reason == "FailedCreate" {
			out = append(out, e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name+": "+e.Message)
		}
	}
	return strings.Join(out, "; ")
}

func jobPods(t *testing.T, p *Plane, job string) []struct {
	Metadata meta `json:"metadata"`
	Status   struct {
		Phase string `json:"phase"`
	} `json:"status"`
} {
	var pods podList
	p.Get(t, "/api/v1/namespaces/"+ns+"/pods?labelSelector=job-name%3D"+job, &pods)
	return pods.Items
}

func waitPod(t *testing.T, p *Plane, job string) string {
	t.Helper()
	var name string
	poll(t, time.Minute, "a pod of Job "+job, func() (bool, string) {
		pods := jobPods(t, p, job)
		if len(pods) > 0 {
			name = pods[0].Metadata.Name
		}
		return name != "", admissionRefusals(t, p)
	})
	return name
}

// failPod ends a pod as a kubelet would report a container that exited
// with code: there is no kubelet, so its status is written directly.
func failPod(t *testing.T, p *Plane, pod, container string, code int) {
	t.Helper()
	now := time.Now().UTC().Format(time.RFC3339)
	patch := map[string]any{"status": map[string]any{
		"phase": "Failed",
		"containerStatuses": []any{map[string]any{
			"name": container, "ready": false, "restartCount": 0, "image": "x", "imageID": "",
			"state": map[string]any{"terminated": map[string]any{"exitCode": code, "reason": "Error", "startedAt": now, "finishedAt": now}},
		}},
	}}
	b, _ := json.Marshal(patch)
	c, body, err := p.Do(context.Background(), "PATCH", "/api/v1/namespaces/"+ns+"/pods/"+pod+"/status", "application/merge-patch+json", b)
	if err != nil || c != 200 {
		t.Fatalf("fail pod %s: %d %s %v", pod, c, body, err)
	}
}

// waitJobFailed waits for a Job's Failed condition and returns its reason.
func waitJobFailed(t *testing.T, p *Plane, job string) string {
	t.Helper()
	var reason string
	poll(t, 2*time.Minute, "Job "+job+" failed", func() (bool, string) {
		var j struct {
			Status struct {
				Conditions []struct{ Type, Status, Reason string } `json:"conditions"`
			} `json:"status"`
		}
		p.Get(t, Resources["Job"].Path(ns, job), &j)
		for _, c := range j.Status.Conditions {
			if c.Type == "Failed" && c.Status == "True" {
				reason = c.Reason
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", j.Status.Conditions)
	})
	return reason
}
