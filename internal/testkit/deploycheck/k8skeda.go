package deploycheck

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/tunefleet/tunefleet/fleet"
	"github.com/tunefleet/tunefleet/jobs"
)

// PendingList is the Redis list asynq keeps a queue's waiting tasks in:
// what a KEDA redis trigger measures.
func PendingList(queue string) string { return "asynq:{" + queue + "}:pending" }

// checkKEDA wants every GPU worker to be a KEDA ScaledJob (one Job per
// task, so that no scale-down can pick a busy pod: KEDA's own docs, "Long-
// running executions"), scaled from zero on its class's pending list with
// a trigger length equal to the tasks one Job holds, and every redis
// trigger well-formed, authenticated from a documented Secret key and
// addressed at the Redis Service in the namespace it renders to.
func (c *k8sCheck) checkKEDA() {
	auths := map[string]triggerAuth{}
	for _, o := range c.objs {
		if o.Kind != "TriggerAuthentication" {
			continue
		}
		var ta triggerAuth
		if err := decodeLoose(o.JSON, &ta); err != nil {
			c.errorf("%s: %w", o, err)
			continue
		}
		auths[o.Name] = ta
		for _, r := range ta.Spec.SecretTargetRef {
			c.secretKey(fmt.Sprintf("%s parameter %s", o, r.Parameter), r.Name, r.Key)
		}
	}
	for _, o := range c.objs {
		switch o.Kind {
		case "ScaledObject":
			var so scaledObject
			if err := decodeLoose(o.JSON, &so); err != nil {
				c.errorf("%s: %w", o, err)
				continue
			}
			c.checkTriggers(o.String(), so.Spec.Triggers, auths)
			if class, ok := c.gpuWorkers["Deployment/"+so.Spec.ScaleTargetRef.Name]; ok {
				c.errorf("%s: scales the GPU workers of %s as a Deployment: a scale-down terminates any replica, busy or not (KEDA docs, \"Long-running executions\"), and kills its build; run them as a ScaledJob (worker run --max-tasks 1 --prefetch 0)", o, class)
			}
		case "ScaledJob":
			sj := o.Typed.(*ScaledJob)
			c.checkTriggers(o.String(), sj.Spec.Triggers, auths)
			c.checkScaledJob(o.String(), sj)
		}
	}
	for _, w := range sortedKeys(c.gpuWorkers) {
		if !strings.HasPrefix(w, "ScaledJob/") {
			c.errorf("%s: serves GPU class %s but is not a KEDA ScaledJob: GPU workers run one task per Job, scaled from zero on their class's pending list", w, c.gpuWorkers[w])
		}
	}
}

func (c *k8sCheck) checkTriggers(where string, triggers []kedaTrigger, auths map[string]triggerAuth) {
	for i, t := range triggers {
		tw := fmt.Sprintf("%s trigger %d", where, i)
		keys, ok := redisScalerKeys[t.Type]
		if !ok {
			continue
		}
		for k := range t.Metadata {
			if !keys[k] {
				c.errorf("%s: KEDA's %s scaler has no metadata key %q (it has: %v)", tw, t.Type, k, sortedKeys(keys))
			}
		}
		if n, err := strconv.Atoi(t.Metadata["listLength"]); err != nil || n < 1 {
			c.errorf("%s: listLength must be a positive integer, got %q", tw, t.Metadata["listLength"])
		}
		if t.AuthenticationRef != nil {
			if _, ok := auths[t.AuthenticationRef.Name]; !ok {
				c.errorf("%s: authenticationRef %q: no such TriggerAuthentication in the manifests", tw, t.AuthenticationRef.Name)
			}
		}
		switch t.Type {
		case "redis":
			if want := c.redisAddress(); want != "" && t.Metadata["address"] != want {
				c.errorf("%s: address %q is not the Redis Service as KEDA's operator (in its own namespace) must name it: want %q", tw, t.Metadata["address"], want)
			}
		default:
			c.checkTopologyTrigger(tw, t)
		}
	}
}

// checkTopologyTrigger: a redis-cluster or redis-sentinel trigger names
// the nodes (and master) that TUNEFLEET_REDIS of ConfigMap
// tunefleet-config names, in the matching scheme: KEDA must measure the
// queues the workers take tasks from.
func (c *k8sCheck) checkTopologyTrigger(tw string, t kedaTrigger) {
	scheme := map[string]string{"redis-cluster": "redis+cluster", "redis-sentinel": "redis+sentinel"}[t.Type]
	var got []string
	for _, a := range strings.Split(t.Metadata["addresses"], ",") {
		if a = strings.TrimSpace(a); a != "" {
			got = append(got, a)
		}
	}
	if len(got) == 0 {
		c.errorf("%s: a %s trigger names its nodes in addresses (host:port, comma-separated)", tw, t.Type)
		return
	}
	for _, a := range got {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			c.errorf("%s: addresses entry %q is not host:port", tw, a)
		}
	}
	raw := ""
	for _, data := range c.configMaps { // its generated name carries a hash
		if v, ok := data["TUNEFLEET_REDIS"]; ok {
			raw = v
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != scheme {
		c.errorf("%s: a %s trigger, but ConfigMap tunefleet-config's TUNEFLEET_REDIS is %q, not a %s:// URL: KEDA would measure another Redis than the workers use", tw, t.Type, raw, scheme)
		return
	}
	want := append([]string{u.Host}, u.Query()["addr"]...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		c.errorf("%s: addresses %v are not the nodes TUNEFLEET_REDIS names (%v)", tw, got, want)
	}
	if t.Type == "redis-sentinel" {
		master := u.Query().Get("master_name")
		if t.Metadata["sentinelMaster"] != master {
			c.errorf("%s: sentinelMaster %q is not TUNEFLEET_REDIS's master_name %q", tw, t.Metadata["sentinelMaster"], master)
		}
	}
}

// redisAddress is the Redis Service's fully qualified address, in the
// namespace the manifests render to.
func (c *k8sCheck) redisAddress() string {
	for _, o := range c.objs {
		if svc, ok := o.Typed.(*corev1.Service); ok && svc.Spec.Selector["app.kubernetes.io/name"] == "tunefleet-redis" && len(svc.Spec.Ports) > 0 {
			return fmt.Sprintf("%s.%s.svc:%d", svc.Name, svc.Namespace, svc.Spec.Ports[0].Port)
		}
	}
	return ""
}

// checkScaledJob: from zero, on the pending list of the class its worker
// serves, one task per Job (the trigger's listLength is what one Job
// holds: its GPU slots plus --prefetch), Jobs that exit once their task is
// done or gone, and an update that leaves running Jobs alone.
func (c *k8sCheck) checkScaledJob(where string, sj *ScaledJob) {
	class := c.gpuWorkers[where]
	if class == "" {
		c.errorf("%s: its pod runs no GPU `worker run`", where)
		return
	}
	if sj.Spec.MinReplicaCount != nil && *sj.Spec.MinReplicaCount != 0 {
		c.errorf("%s: minReplicaCount must be 0, so that an idle class holds no GPU", where)
	}
	if sj.Spec.Rollout.Strategy != "gradual" {
		c.errorf("%s: rollout.strategy %q: KEDA's default (immediate) rollout deletes the running Jobs (and their builds) when the ScaledJob changes; want gradual", where, sj.Spec.Rollout.Strategy)
	}
	if sj.Spec.ScalingStrategy.Strategy != "accurate" {
		c.errorf("%s: scalingStrategy.strategy %q: a task leaves the pending list when a Job takes it, so running Jobs must not be subtracted again; want accurate", where, sj.Spec.ScalingStrategy.Strategy)
	}
	if p := sj.Spec.JobTargetRef.Parallelism; p != nil && *p != 1 {
		c.errorf("%s: jobTargetRef.parallelism %d: one pod per Job, one Job per task", where, *p)
	}
	var cmd *Command
	var ctr corev1.Container
	for _, pc := range c.commands {
		if pc.pod.owner.String() == where && pc.cmd.Path == "worker run" {
			cmd, ctr = pc.cmd, pc.ctr
		}
	}
	if cmd == nil {
		return
	}
	slots := int(ctr.Resources.Limits.Name(GPUResource, "").Value())
	prefetch, _ := strconv.Atoi(cmd.Flag("prefetch"))
	if maxTasks, _ := strconv.Atoi(cmd.Flag("max-tasks")); maxTasks != slots || prefetch != 0 {
		c.errorf("%s: worker run --max-tasks %s --prefetch %s: a Job's worker takes one task per GPU it holds (%d) and no more (--max-tasks %d --prefetch 0), or it keeps a GPU for tasks KEDA started other Jobs for", where, cmd.Flag("max-tasks"), cmd.Flag("prefetch"), slots, slots)
	}
	c.checkJobDeadline(where, sj, cmd, class)
	if d, err := time.ParseDuration(cmd.Flag("idle-exit")); err != nil || d <= 0 {
		c.errorf("%s: worker run without --idle-exit: a Job whose task another Job took would hold its GPU forever", where)
	}
	found := false
	for i, t := range sj.Spec.Triggers {
		if redisScalerKeys[t.Type] == nil || t.Metadata["listName"] != PendingList(class) {
			continue
		}
		found = true
		if n, _ := strconv.Atoi(t.Metadata["listLength"]); n != slots+prefetch {
			c.errorf("%s trigger %d: listLength %s, but one Job holds %d tasks (%d slots + --prefetch %d): KEDA would start the wrong number of GPU pods", where, i, t.Metadata["listLength"], slots+prefetch, slots, prefetch)
		}
	}
	if !found {
		c.errorf("%s: no redis trigger on listName %q, the pending list of class %s", where, PendingList(class), class)
	}
}

// checkJobDeadline wants a GPU Job that never gets a node removed
// (issue 34: it stayed Pending, and when capacity came back a node booted
// for a worker that found nothing to do). KEDA has no pending-Job cleanup;
// a Job's activeDeadlineSeconds counts from its creation, pending time
// included, so it removes a Job whose pod never started. It also bounds a
// running build, so it must allow the longest task the fleet sends this
// class (jobs.GraphTaskTimeout of its candidates) plus the worker's
// --shutdown-timeout, or it cuts a build asynq would let finish. The task
// of a removed Job stays on the pending list: a worker dequeues only once
// it runs.
func (c *k8sCheck) checkJobDeadline(where string, sj *ScaledJob, cmd *Command, class string) {
	d := sj.Spec.JobTargetRef.ActiveDeadlineSeconds
	if d == nil {
		c.errorf("%s: jobTargetRef.activeDeadlineSeconds unset: a Job whose pod never gets a node stays Pending forever", where)
		return
	}
	shutdown, _ := time.ParseDuration(cmd.Flag("shutdown-timeout"))
	need := shutdown
	for name, data := range c.configMaps {
		for key, v := range data {
			if !strings.HasSuffix(key, ".yaml") || !strings.Contains(v, "tunefleet.fleet/v1") {
				continue
			}
			f, err := fleet.Parse("ConfigMap/"+name+" "+key, []byte(v))
			if err != nil {
				continue // checkFleet says why
			}
			entries, _ := f.Entries()
			for _, e := range entries {
				if e.Target == class {
					need = max(need, jobs.GraphTaskTimeout(e.Options.CandidateTimeout, len(e.Options.Candidates))+shutdown)
				}
			}
		}
	}
	if got := time.Duration(*d) * time.Second; got < need {
		c.errorf("%s: jobTargetRef.activeDeadlineSeconds %d (%s) is under the longest task the fleet sends class %s plus --shutdown-timeout (%s): the deadline would cut a build", where, *d, got, class, need)
	}
}
