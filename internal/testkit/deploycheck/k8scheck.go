package deploycheck

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// GPUProductLabel is the node label NVIDIA's GPU feature discovery
// publishes with the GPU's product name ("NVIDIA-H100-80GB-HBM3").
const GPUProductLabel = "nvidia.com/gpu.product"

// GPUResource is the extended resource NVIDIA's device plugin serves.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// pod is one pod template of a workload.
type pod struct {
	where  string // "Deployment/tunefleet-worker-cpu"
	owner  Object
	labels map[string]string
	spec   *corev1.PodSpec
}

// k8sCheck holds what the checks of one rendered kustomization look up.
type k8sCheck struct {
	objs       []Object
	secrets    map[string][]string // Secret name → keys (the secrets contract)
	configMaps map[string]map[string]string
	gpuWorkers map[string]string // "ScaledJob/name" → its GPU queue
	commands   []podCommand      // every command line of ours, parsed
	errs       []error
}

// CheckK8s checks rendered objects against the CLI and each other. secrets
// is the contract of the Secrets the cluster must hold (they are
// referenced, never rendered): name → keys.
func CheckK8s(objs []Object, secrets map[string][]string) []error {
	c := &k8sCheck{objs: objs, secrets: secrets, configMaps: map[string]map[string]string{}, gpuWorkers: map[string]string{}}
	for _, o := range objs {
		switch t := o.Typed.(type) {
		case *corev1.ConfigMap:
			c.configMaps[o.Name] = t.Data
		case *corev1.Secret:
			c.errorf("%s: a Secret is rendered into the manifests: reference it (secretKeyRef) and create it in the cluster instead", o)
		}
	}
	for _, p := range c.pods() {
		c.checkPod(p)
	}
	c.checkKEDA()
	c.checkPDBs()
	c.checkRules()
	c.checkNightlyRetries()
	return c.errs
}

func (c *k8sCheck) errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

func (c *k8sCheck) pods() []pod {
	var ps []pod
	for _, o := range c.objs {
		switch t := o.Typed.(type) {
		case *appsv1.Deployment:
			ps = append(ps, pod{o.String(), o, t.Spec.Template.Labels, &t.Spec.Template.Spec})
		case *appsv1.StatefulSet:
			ps = append(ps, pod{o.String(), o, t.Spec.Template.Labels, &t.Spec.Template.Spec})
		case *batchv1.CronJob:
			tpl := &t.Spec.JobTemplate.Spec.Template
			ps = append(ps, pod{o.String(), o, tpl.Labels, &tpl.Spec})
		case *ScaledJob:
			tpl := &t.Spec.JobTargetRef.Template
			ps = append(ps, pod{o.String(), o, tpl.Labels, &tpl.Spec})
		}
	}
	return ps
}

func (c *k8sCheck) checkPod(p pod) {
	for _, ctr := range slices.Concat(p.spec.InitContainers, p.spec.Containers) {
		where := fmt.Sprintf("%s container %s", p.where, ctr.Name)
		names, values := c.checkEnvRefs(where, ctr)
		ours := strings.Contains(ctr.Image, "tunefleet/") || len(ctr.Command) > 0 && IsOurs(ctr.Command[0])
		if !ours {
			continue
		}
		if len(ctr.Command) == 0 {
			c.errorf("%s: give command (producer or worker) explicitly, so that the command line can be checked", where)
			continue
		}
		argv := expandK8s(slices.Concat(ctr.Command, ctr.Args), values)
		cmd, err := ParseCommand(argv)
		if err != nil {
			c.errorf("%s: %w", where, err)
			continue
		}
		c.errs = append(c.errs, CheckEnv(where, names)...)
		c.commands = append(c.commands, podCommand{pod: p, ctr: ctr, cmd: cmd, env: values})
		if cmd.Path == "worker run" {
			c.checkWorker(p, where, ctr, cmd)
		}
	}
}

// checkEnvRefs checks every Secret and ConfigMap reference of a container
// and returns the names of the variables it sets and their literal values.
func (c *k8sCheck) checkEnvRefs(where string, ctr corev1.Container) (names []string, values map[string]string) {
	values = map[string]string{}
	for _, e := range ctr.Env {
		names = append(names, e.Name)
		values[e.Name] = e.Value
		if e.ValueFrom == nil {
			continue
		}
		values[e.Name] = "(from " + e.Name + ")"
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			c.secretKey(where+" env "+e.Name, r.Name, r.Key)
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			if _, ok := c.configMaps[r.Name][r.Key]; !ok {
				c.errorf("%s env %s: ConfigMap %q has no key %q", where, e.Name, r.Name, r.Key)
			}
		}
	}
	for _, ef := range ctr.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			data, ok := c.configMaps[ef.ConfigMapRef.Name]
			if !ok {
				c.errorf("%s envFrom: no ConfigMap %q in the manifests", where, ef.ConfigMapRef.Name)
			}
			for k, v := range data {
				names = append(names, ef.Prefix+k)
				values[ef.Prefix+k] = v
			}
		case ef.SecretRef != nil:
			keys, ok := c.secrets[ef.SecretRef.Name]
			if !ok {
				c.errorf("%s envFrom: Secret %q is not one the deployment documents (%s)", where, ef.SecretRef.Name, strings.Join(sortedKeys(c.secrets), ", "))
			}
			for _, k := range keys {
				names = append(names, ef.Prefix+k)
			}
		}
	}
	return names, values
}

// secretKey checks one reference to a key of a Secret the cluster holds.
func (c *k8sCheck) secretKey(where, name, key string) {
	keys, ok := c.secrets[name]
	switch {
	case !ok:
		c.errorf("%s: references Secret %q, which the deployment does not document (known: %s)", where, name, strings.Join(sortedKeys(c.secrets), ", "))
	case !slices.Contains(keys, key):
		c.errorf("%s: references key %q of Secret %q, which has none (its keys: %s; see deploy/k8s/credentials.env.example)", where, key, name, strings.Join(keys, ", "))
	}
}

var k8sVarRE = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandK8s expands $(VAR) references in a command line as the kubelet
// does, from the container's environment; unknown ones stay as written.
func expandK8s(argv []string, values map[string]string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = k8sVarRE.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := values[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
	}
	return out
}

// checkWorker checks a `worker run` container: probes on its /healthz and /readyz, a
// grace period longer than its shutdown timeout, and for a GPU class a GPU
// limit and placement on that class's nodes (checkGPU).
func (c *k8sCheck) checkWorker(p pod, where string, ctr corev1.Container, cmd *Command) {
	health := cmd.Flag("health")
	_, port, _ := strings.Cut(health, ":")
	// Liveness on /healthz (wedged only), readiness on /readyz (Redis, a
	// broken machine): a liveness probe on Redis kills every build over a
	// Redis restart (issue 34).
	for _, pr := range []struct {
		name, path string
		probe      *corev1.Probe
	}{{"livenessProbe", "/healthz", ctr.LivenessProbe}, {"readinessProbe", "/readyz", ctr.ReadinessProbe}} {
		if p := pr.probe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != pr.path || p.HTTPGet.Port.String() != port {
			c.errorf("%s: %s must GET %s on port %s (the worker's --health %q)", where, pr.name, pr.path, port, health)
		}
	}
	if err := checkGrace(cmd, time.Duration(gracePeriod(p.spec))*time.Second, "terminationGracePeriodSeconds"); err != nil {
		c.errorf("%s: %w", where, err)
	}
	c.errs = append(c.errs, checkWorkDir(where, p.spec, ctr, cmd.Flag("work-dir"))...)
	queues := strings.Split(cmd.Flag("queues"), ",")
	if queues[0] == "" {
		c.errorf("%s: give --queues: the class a worker serves must be known to its placement and its KEDA trigger", where)
		return
	}
	if slices.Equal(queues, []string{"cpu"}) {
		return
	}
	if len(queues) != 1 {
		c.errorf("%s: a GPU worker serves one class (its ScaledJob scales on that queue), not %v", where, queues)
		return
	}
	c.checkGPU(p, where, ctr, queues[0])
}

// gracePeriod is a pod's terminationGracePeriodSeconds (the API's default 30).
func gracePeriod(spec *corev1.PodSpec) int64 {
	if spec.TerminationGracePeriodSeconds != nil {
		return *spec.TerminationGracePeriodSeconds
	}
	return 30
}

func (c *k8sCheck) checkGPU(p pod, where string, ctr corev1.Container, class string) {
	if q, ok := ctr.Resources.Limits[GPUResource]; !ok || q.Value() < 1 {
		c.errorf("%s: serves GPU class %s but has no %s limit: it would be scheduled on a node without a GPU, or share one", where, class, GPUResource)
	}
	c.errs = append(c.errs, checkGPUPlacement(where, p.spec, class)...)
	c.errs = append(c.errs, checkScratch(where, p.spec, ctr, true)...)
	c.errs = append(c.errs, checkGraceCaps(p, true)...)
	c.gpuWorkers[p.owner.String()] = class
}

// checkPDBs wants every worker Deployment covered by a PodDisruptionBudget,
// so that a node drain does not take a whole class down at once.
func (c *k8sCheck) checkPDBs() {
	for _, pc := range c.commands {
		p := pc.pod
		if p.owner.Kind != "Deployment" || pc.cmd.Path != "worker run" {
			continue
		}
		covered := false
		for _, o := range c.objs {
			if pdb, ok := o.Typed.(*policyv1.PodDisruptionBudget); ok && pdb.Spec.Selector != nil {
				sel := labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels)
				covered = covered || sel.Matches(labels.Set(p.labels))
			}
		}
		if !covered {
			c.errorf("%s: no PodDisruptionBudget selects its pods (labels %v)", p.where, p.labels)
		}
	}
}
