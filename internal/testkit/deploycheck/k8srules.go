package deploycheck

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/tunefleet/tunefleet/bundle"
	"github.com/tunefleet/tunefleet/bundlestore"
	"github.com/tunefleet/tunefleet/fleet"
	"github.com/tunefleet/tunefleet/internal/cli"
)

// GPUClassLabel is the node label tunefleet's GPU workers are placed on.
// A node group's template declares it (cluster-autoscaler's node-template
// tags, a Karpenter NodePool's labels, a GKE node pool's --node-labels), so
// an autoscaler knows before any node boots that scaling the group up
// makes a pending GPU pod schedulable.
const GPUClassLabel = "tunefleet.io/gpu-class"

// ClassesEnv is the variable that declares the deployment's target classes
// to submit and the nightly (one list, in ConfigMap tunefleet-classes).
const ClassesEnv = "TUNEFLEET_CLASSES"

// ClusterAutoscalerMaxGrace is cluster-autoscaler's
// --max-graceful-termination-sec default: a pod it evicts on a scale-down
// is killed after this, whatever its terminationGracePeriodSeconds.
const ClusterAutoscalerMaxGrace = 600 * time.Second

// podCommand is one of our command lines, in the pod that runs it.
type podCommand struct {
	pod pod
	ctr corev1.Container
	cmd *Command
	env map[string]string
}

// bootLabels are node labels that exist only once a node has booted
// (GPU feature discovery's): an autoscaler scaling from zero cannot know
// them, so requiring one never brings a node up.
var bootLabels = regexp.MustCompile(`^(nvidia\.com|feature\.node\.kubernetes\.io)/`)

func (c *k8sCheck) checkRules() {
	c.checkPodSecurity()
	c.checkNetworkPolicies()
	c.checkRedis()
	c.checkClasses()
	c.checkScaledTargets()
	c.checkImagePins()
	for _, o := range c.objs {
		if pvc, ok := o.Typed.(*corev1.PersistentVolumeClaim); ok && slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
			c.errorf("%s: ReadWriteMany, which the default storage classes of the big managed clusters do not provide (it would stay Pending): keep bundles in the store (producer bundle push)", o)
		}
	}
	for _, p := range c.pods() {
		for _, ctr := range p.spec.Containers {
			c.errs = append(c.errs, checkScratch(p.where+" container "+ctr.Name, p.spec, ctr, false)...)
		}
	}
}

// checkPodSecurity runs the API server's own Pod Security admission checks
// (k8s.io/pod-security-admission, level restricted, latest version) on
// every pod template, and wants the dedicated ServiceAccount with no API
// token mounted: tunefleet never calls the Kubernetes API.
func (c *k8sCheck) checkPodSecurity() {
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		c.errorf("pod security evaluator: %w", err)
		return
	}
	lv := psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}
	accounts := map[string]*corev1.ServiceAccount{}
	for _, o := range c.objs {
		if sa, ok := o.Typed.(*corev1.ServiceAccount); ok {
			accounts[sa.Name] = sa
		}
		if ns, ok := o.Typed.(*corev1.Namespace); ok && ns.Labels[psapi.EnforceLevelLabel] != string(psapi.LevelRestricted) {
			c.errorf("%s: label %s=%s, so that the API server refuses a pod that is not", o, psapi.EnforceLevelLabel, psapi.LevelRestricted)
		}
	}
	for _, p := range c.pods() {
		meta := &metav1.ObjectMeta{Labels: p.labels}
		if r := policy.AggregateCheckResults(ev.EvaluatePod(lv, meta, p.spec)); !r.Allowed {
			c.errorf("%s: Pod Security %q forbids it: %s", p.where, lv.Level, r.ForbiddenReason())
		}
		sa, ok := accounts[p.spec.ServiceAccountName]
		switch {
		case p.spec.ServiceAccountName == "" || !ok:
			c.errorf("%s: serviceAccountName %q: run as the manifests' own ServiceAccount, not the namespace's default", p.where, p.spec.ServiceAccountName)
		case sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken:
			c.errorf("ServiceAccount/%s: automountServiceAccountToken must be false", sa.Name)
		}
		if p.spec.AutomountServiceAccountToken == nil || *p.spec.AutomountServiceAccountToken {
			c.errorf("%s: automountServiceAccountToken must be false: no tunefleet binary talks to the Kubernetes API", p.where)
		}
		for _, ctr := range p.spec.Containers {
			if sc := ctr.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				c.errorf("%s container %s: readOnlyRootFilesystem must be true (scratch goes to sized emptyDir volumes)", p.where, ctr.Name)
			}
		}
	}
}

// checkNetworkPolicies: every pod is under a default-deny ingress policy,
// Redis is reachable from our clients only (every pod that runs producer
// or worker), and no policy lets everyone into Redis.
func (c *k8sCheck) checkNetworkPolicies() {
	var nps []*networkingv1.NetworkPolicy
	for _, o := range c.objs {
		if np, ok := o.Typed.(*networkingv1.NetworkPolicy); ok {
			nps = append(nps, np)
		}
	}
	selects := func(np *networkingv1.NetworkPolicy, l map[string]string) bool {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		return err == nil && sel.Matches(labels.Set(l))
	}
	var redisLabels map[string]string
	for _, p := range c.pods() {
		governed := false
		for _, np := range nps {
			governed = governed || selects(np, p.labels) && slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
		}
		if !governed {
			c.errorf("%s: no NetworkPolicy governs its ingress: anything in the cluster can reach it", p.where)
		}
		if p.labels["app.kubernetes.io/name"] == "tunefleet-redis" {
			redisLabels = p.labels
		}
	}
	if redisLabels == nil {
		return
	}
	admits := func(l map[string]string) bool {
		for _, np := range nps {
			if !selects(np, redisLabels) {
				continue
			}
			for _, r := range np.Spec.Ingress {
				for _, peer := range r.From {
					if peer.NamespaceSelector != nil || peer.IPBlock != nil || peer.PodSelector == nil {
						continue
					}
					if sel, err := metav1.LabelSelectorAsSelector(peer.PodSelector); err == nil && sel.Matches(labels.Set(l)) {
						return true
					}
				}
			}
		}
		return false
	}
	for _, np := range nps {
		if !selects(np, redisLabels) {
			continue
		}
		for _, r := range np.Spec.Ingress {
			if len(r.From) == 0 {
				c.errorf("NetworkPolicy/%s: lets anyone reach Redis (an ingress rule with no from)", np.Name)
			}
		}
	}
	for _, pc := range c.commands {
		if !admits(pc.pod.labels) {
			c.errorf("%s: no NetworkPolicy lets it reach Redis (labels %v)", pc.pod.where, pc.pod.labels)
		}
	}
}

var maxmemoryRE = regexp.MustCompile(`^(\d+)(b|k|kb|m|mb|g|gb)?$`)

// checkRedis: maxmemory set, a quarter or more under the container's
// memory limit (an AOF rewrite forks; copy-on-write pages count too),
// noeviction, and the append-only file on a PersistentVolume.
func (c *k8sCheck) checkRedis() {
	for _, o := range c.objs {
		ss, ok := o.Typed.(*appsv1.StatefulSet)
		if !ok {
			continue
		}
		for _, ctr := range ss.Spec.Template.Spec.Containers {
			if len(ctr.Command) == 0 || ctr.Command[0] != "redis-server" {
				continue
			}
			where := fmt.Sprintf("%s container %s", o, ctr.Name)
			args := map[string]string{}
			for i := 0; i+1 < len(ctr.Args); i++ {
				if strings.HasPrefix(ctr.Args[i], "--") {
					args[strings.TrimPrefix(ctr.Args[i], "--")] = ctr.Args[i+1]
				}
			}
			limit := ctr.Resources.Limits.Memory()
			mm, ok := redisBytes(args["maxmemory"])
			switch {
			case !ok || mm == 0:
				c.errorf("%s: no --maxmemory: Redis grows until the kernel kills it at the %s limit", where, limit)
			case limit.IsZero():
				c.errorf("%s: no memory limit for --maxmemory to sit under", where)
			case mm > limit.Value()*3/4:
				c.errorf("%s: --maxmemory %s is over 75%% of the %s memory limit: an AOF rewrite's fork would take Redis over it", where, args["maxmemory"], limit)
			}
			if args["maxmemory-policy"] != "noeviction" {
				c.errorf("%s: --maxmemory-policy %q: a queue must refuse writes when full, never evict tasks; want noeviction", where, args["maxmemory-policy"])
			}
			if args["appendonly"] != "yes" {
				c.errorf("%s: --appendonly yes: a restart must keep every task", where)
			}
			dir := cmp(args["dir"], "/data")
			onPV := false
			for _, m := range ctr.VolumeMounts {
				for _, t := range ss.Spec.VolumeClaimTemplates {
					onPV = onPV || m.Name == t.Name && m.MountPath == dir
				}
			}
			if !onPV {
				c.errorf("%s: the append-only file (--dir %s) is not on a PersistentVolume (volumeClaimTemplates)", where, dir)
			}
		}
	}
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// redisBytes reads a Redis memory size ("3gb", "512mb", "1073741824").
func redisBytes(s string) (int64, bool) {
	m := maxmemoryRE.FindStringSubmatch(strings.ToLower(s))
	if m == nil {
		return 0, false
	}
	var n int64
	fmt.Sscan(m[1], &n)
	mul := map[string]int64{"": 1, "b": 1, "k": 1000, "kb": 1024, "m": 1000_000, "mb": 1 << 20, "g": 1000_000_000, "gb": 1 << 30}[m[2]]
	return n * mul, true
}

// checkClasses: the classes are declared in one place (ConfigMap
// tunefleet-classes' TUNEFLEET_CLASSES), given to every producer command
// that enqueues or shows them (nightly, serve, submit), and equal to the
// classes the workers serve; the fleet's targets are among them.
func (c *k8sCheck) checkClasses() {
	var cm map[string]string
	for _, data := range c.configMaps { // its generated name carries a hash
		if _, ok := data[ClassesEnv]; ok {
			cm = data
		}
	}
	declared := strings.Split(cm[ClassesEnv], ",")
	storeURL := ""
	for _, data := range c.configMaps {
		if v, ok := data["TUNEFLEET_STORE"]; ok {
			storeURL = v
		}
	}
	for name, data := range c.configMaps {
		for key, v := range data {
			if strings.HasSuffix(key, ".yaml") && strings.Contains(v, "tunefleet.fleet/v1") {
				c.errs = append(c.errs, checkFleet("ConfigMap/"+name+" "+key, []byte(v), declared, storeURL)...)
			}
		}
	}
	if cm[ClassesEnv] == "" {
		c.errorf("no ConfigMap tunefleet-classes with %s: with no GPU worker running, submit and the nightly refuse a GPU class, and KEDA never starts one (deadlock at zero)", ClassesEnv)
		return
	}
	served := map[string]bool{}
	for _, pc := range c.commands {
		switch pc.cmd.Path {
		case "worker run":
			for _, q := range strings.Split(pc.cmd.Flag("queues"), ",") {
				served[q] = true
				if !slices.Contains(declared, q) {
					c.errorf("%s: serves class %s, which %s (%s) does not declare", pc.pod.where, q, ClassesEnv, cm[ClassesEnv])
				}
			}
		case "producer nightly", "producer serve", "producer submit":
			if pc.env[ClassesEnv] != cm[ClassesEnv] {
				c.errorf("%s: %s is not given %s from ConfigMap tunefleet-classes", pc.pod.where, pc.cmd.Path, ClassesEnv)
			}
		}
	}
	for _, d := range declared {
		if !served[d] {
			c.errorf("ConfigMap tunefleet-classes: declares class %s, which no worker serves: its tasks would wait forever", d)
		}
	}
}

// checkScaledTargets: for every object a ScaledObject scales, the three-
// way strategic merge patch `kubectl apply` sends for the unchanged
// manifest against a live copy KEDA has scaled must not touch replicas
// (the HPA owns the field; Kubernetes' HPA docs say to leave it out).
func (c *k8sCheck) checkScaledTargets() {
	for _, o := range c.objs {
		if o.Kind != "ScaledObject" {
			continue
		}
		var so scaledObject
		if decodeLoose(o.JSON, &so) != nil {
			continue
		}
		for _, t := range c.objs {
			if t.Kind != cmp(so.Spec.ScaleTargetRef.Kind, "Deployment") || t.Name != so.Spec.ScaleTargetRef.Name {
				continue
			}
			if err := applyKeepsReplicas(t); err != nil {
				c.errorf("%s (scaled by %s): %w", t, o, err)
			}
		}
	}
}

// applyKeepsReplicas computes the patch a client-side apply of obj sends
// against a live copy scaled to 3 replicas (last-applied = the manifest).
func applyKeepsReplicas(obj Object) error {
	var live map[string]any
	if err := json.Unmarshal(obj.JSON, &live); err != nil {
		return err
	}
	spec, _ := live["spec"].(map[string]any)
	if spec == nil {
		return fmt.Errorf("no spec")
	}
	spec["replicas"] = 3
	current, err := json.Marshal(live)
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateThreeWayMergePatch(obj.JSON, obj.JSON, current, mustLookup(obj.Typed), true) // overwrite: what kubectl apply does
	if err != nil {
		return err
	}
	var p struct {
		Spec map[string]json.RawMessage `json:"spec"`
	}
	json.Unmarshal(patch, &p)
	if r, ok := p.Spec["replicas"]; ok {
		return fmt.Errorf("kubectl apply of the unchanged manifest sends spec.replicas=%s against a live count of 3 (patch %s): drop replicas from what KEDA scales", r, patch)
	}
	return nil
}

func mustLookup(typed any) strategicpatch.LookupPatchMeta {
	m, err := strategicpatch.NewPatchMetaFromStruct(typed)
	if err != nil {
		panic(err)
	}
	return m
}

// checkGPUPlacement: required node affinity only on GPUClassLabel (a label
// the node group's template declares), never on a label a node has only
// once booted; GPU feature discovery's product as a preference naming
// exactly one product (one class per GPU product); the usual GPU taint
// tolerated; the pod marked not-evictable for cluster-autoscaler and
// Karpenter (a build outlives any grace period); a grace period within
// cluster-autoscaler's cap.
func checkGPUPlacement(where string, spec *corev1.PodSpec, class string) (errs []error) {
	fail := func(f string, a ...any) { errs = append(errs, fmt.Errorf(where+": "+f, a...)) }
	var required []corev1.NodeSelectorRequirement
	var products []string
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil {
		if r := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
			for _, t := range r.NodeSelectorTerms {
				required = append(required, t.MatchExpressions...)
			}
		}
		for _, p := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			for _, e := range p.Preference.MatchExpressions {
				if e.Key == GPUProductLabel {
					products = append(products, e.Values...)
				}
			}
		}
	}
	for k, v := range spec.NodeSelector {
		required = append(required, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{v}})
	}
	onClass := false
	for _, e := range required {
		if e.Key == GPUProductLabel {
			products = append(products, e.Values...)
		}
		if bootLabels.MatchString(e.Key) {
			fail("requires node label %s, which GPU feature discovery adds only after a node has booted: an autoscaler scaling from zero never brings one up (cluster-autoscaler: NotTriggerScaleUp); require %s=%s, declared in the node group's template, and keep %s as a preference", e.Key, GPUClassLabel, class, e.Key)
		}
		if e.Key == GPUClassLabel {
			onClass = slices.Equal(e.Values, []string{class}) && e.Operator == corev1.NodeSelectorOpIn
			if !onClass {
				fail("node affinity %s %s %v, want In [%s]", e.Key, e.Operator, e.Values, class)
			}
		}
	}
	if !onClass {
		fail("no required node affinity on %s=%s (the label its node group's template declares)", GPUClassLabel, class)
	}
	if len(products) > 1 {
		fail("class %s admits %d GPU products %v: a run is tied to one platform, so variants (SXM, PCIe, NVL) hand each other's tasks back; one class per GPU product", class, len(products), products)
	}
	tolerated := false
	for _, t := range spec.Tolerations {
		tolerated = tolerated || t.Key == string(GPUResource) && t.Operator == corev1.TolerationOpExists
	}
	if !tolerated {
		fail("does not tolerate the %s taint GPU node groups carry (GKE, AKS, EKS GPU AMIs)", GPUResource)
	}
	return errs
}

// checkGraceCaps: a worker pod an autoscaler may evict gets at most
// cluster-autoscaler's 600 s; a GPU worker, whose build outlasts any grace
// period, must not be evicted by cluster-autoscaler or Karpenter at all.
func checkGraceCaps(p pod, gpu bool) (errs []error) {
	grace := time.Duration(gracePeriod(p.spec)) * time.Second
	if grace > ClusterAutoscalerMaxGrace {
		errs = append(errs, fmt.Errorf("%s: terminationGracePeriodSeconds %d is over cluster-autoscaler's %s cap (--max-graceful-termination-sec): a scale-down kills it before its tasks are handed back", p.where, gracePeriod(p.spec), ClusterAutoscalerMaxGrace))
	}
	if gpu {
		var ann map[string]string
		if sj, ok := p.owner.Typed.(*ScaledJob); ok {
			ann = sj.Spec.JobTargetRef.Template.Annotations
		}
		if ann["cluster-autoscaler.kubernetes.io/safe-to-evict"] != "false" || ann["karpenter.sh/do-not-disrupt"] != "true" {
			errs = append(errs, fmt.Errorf("%s: a build may run far longer than any grace period: annotate the pod cluster-autoscaler.kubernetes.io/safe-to-evict: \"false\" and karpenter.sh/do-not-disrupt: \"true\", so no consolidation evicts it", p.where))
		}
	}
	return errs
}

// checkScratch: every emptyDir is sized; a GPU worker requests and limits
// ephemeral-storage, with room for its emptyDirs (they count against it).
// checkNightlyRetries wants a CronJob that runs `producer nightly` to fail
// at once on bad input (exit 2: a fleet file or bundle that does not
// validate fails the same way every time) and retry the rest: a
// podFailurePolicy rule FailJob on exit code 2 for the nightly container,
// which needs restartPolicy Never (issue 34: OnFailure and backoffLimit 2
// ran a bad fleet file three times, three pages).
func (c *k8sCheck) checkNightlyRetries() {
	for _, o := range c.objs {
		cj, ok := o.Typed.(*batchv1.CronJob)
		if !ok {
			continue
		}
		js := cj.Spec.JobTemplate.Spec
		for _, ctr := range js.Template.Spec.Containers {
			if Subcommand(append(slices.Clone(ctr.Command), ctr.Args...)) != "producer nightly" {
				continue
			}
			where := "CronJob/" + cj.Name
			if js.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
				c.errorf("%s: restartPolicy %q: the kubelet restarts a failed nightly in place, whatever its exit code (a podFailurePolicy needs Never)", where, js.Template.Spec.RestartPolicy)
			}
			failFast := false
			if pfp := js.PodFailurePolicy; pfp != nil {
				for _, r := range pfp.Rules {
					e := r.OnExitCodes
					if r.Action == batchv1.PodFailurePolicyActionFailJob && e != nil && e.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn &&
						(e.ContainerName == nil || *e.ContainerName == ctr.Name) && slices.Contains(e.Values, int32(exitUsage)) {
						failFast = true
					}
				}
			}
			if !failFast {
				c.errorf("%s: no podFailurePolicy rule FailJob on exit code %d (bad input) for container %s: a bad fleet file runs backoffLimit+1 times and pages each time", where, exitUsage, ctr.Name)
			}
		}
	}
}

// exitUsage is the binaries' exit code for bad input (docs/cli.md).
const exitUsage = cli.ExitUsage

// checkWorkDir wants a worker's task scratch (--work-dir: the graph's
// files, the engines, the build logs) on a volume of its own that holds at
// least the largest bundle a producer accepts (bundle.DefaultArchiveLimits),
// never on /tmp or the container's root: issue 34 found scratch in the 2Gi
// /tmp emptyDir while the 20Gi work volume stayed empty, and a big bundle
// got the pod evicted.
func checkWorkDir(where string, spec *corev1.PodSpec, ctr corev1.Container, dir string) []error {
	if dir == "" {
		return []error{fmt.Errorf("%s: worker run without --work-dir: its task scratch goes to TMPDIR (/tmp), not the work volume", where)}
	}
	var mount *corev1.VolumeMount
	for i, m := range ctr.VolumeMounts {
		if m.MountPath == dir {
			mount = &ctr.VolumeMounts[i]
		}
	}
	if mount == nil {
		return []error{fmt.Errorf("%s: --work-dir %s is no volume's mount path: scratch would land on the read-only root filesystem", where, dir)}
	}
	if dir == "/tmp" {
		return []error{fmt.Errorf("%s: --work-dir /tmp: give the task scratch a volume of its own, /tmp is for small temporary files", where)}
	}
	limit := resource.NewQuantity(bundle.DefaultArchiveLimits().MaxBytes, resource.BinarySI)
	for _, v := range spec.Volumes {
		if v.Name != mount.Name || v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil {
			continue
		}
		if v.EmptyDir.SizeLimit.Cmp(*limit) < 0 {
			return []error{fmt.Errorf("%s: --work-dir %s is volume %s of %s, under the largest bundle a producer accepts (%s, bundle.DefaultArchiveLimits): one such task would get the pod evicted",
				where, dir, v.Name, v.EmptyDir.SizeLimit.String(), limit.String())}
		}
	}
	return nil
}

func checkScratch(where string, spec *corev1.PodSpec, ctr corev1.Container, gpu bool) (errs []error) {
	var sum resource.Quantity
	for _, v := range spec.Volumes {
		if v.EmptyDir == nil {
			continue
		}
		if v.EmptyDir.SizeLimit == nil {
			if !gpu {
				errs = append(errs, fmt.Errorf("%s: emptyDir %s has no sizeLimit: scratch could fill the node's disk", where, v.Name))
			}
			continue
		}
		sum.Add(*v.EmptyDir.SizeLimit)
	}
	if !gpu {
		return errs
	}
	req, lim := ctr.Resources.Requests[corev1.ResourceEphemeralStorage], ctr.Resources.Limits[corev1.ResourceEphemeralStorage]
	switch {
	case req.IsZero() || lim.IsZero():
		errs = append(errs, fmt.Errorf("%s: a GPU worker's build scratch is multi-GB: give ephemeral-storage requests and limits, or the node's disk fills and the kubelet evicts", where))
	case lim.Cmp(sum) < 0:
		errs = append(errs, fmt.Errorf("%s: ephemeral-storage limit %s is under its emptyDirs' %s", where, lim.String(), sum.String()))
	}
	for _, v := range spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit == nil {
			errs = append(errs, fmt.Errorf("%s: emptyDir %s has no sizeLimit", where, v.Name))
		}
	}
	return errs
}

// checkImagePins: every image not built here is pinned by digest.
func (c *k8sCheck) checkImagePins() {
	for _, p := range c.pods() {
		for _, ctr := range slices.Concat(p.spec.InitContainers, p.spec.Containers) {
			if isOurImage(ctr.Image) && !pullable(ctr.Image) {
				c.errorf("%s container %s: image %s is no registry's: set the registry and tag once for every overlay (make images, then make set-image REGISTRY=… TAG=…; deploy/k8s/images)", p.where, ctr.Name, ctr.Image)
			}
			if !isOurImage(ctr.Image) && !digestRE.MatchString(ctr.Image) {
				c.errorf("%s container %s: image %s is not pinned by digest (NAME:TAG@sha256:DIGEST)", p.where, ctr.Name, ctr.Image)
			}
		}
	}
}

// ourImages are the images docker-bake.hcl builds.
var ourImages = []string{"producer", "worker-cpu", "worker-gpu"}

func isOurImage(ref string) bool {
	name, _, _ := strings.Cut(ref, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return slices.Contains(ourImages, name[strings.LastIndex(name, "/")+1:])
}

// checkFleet reads a fleet file as the nightly does (fleet.Parse,
// Entries) and wants every target declared, trt: candidates only on GPU
// targets, and every bundle in the store (s3://… or a store key: the
// nightly's pod has no shared volume).
func checkFleet(where string, data []byte, declared []string, storeURL string) (errs []error) {
	f, err := fleet.Parse(where, data)
	if err != nil {
		return []error{err}
	}
	entries, err := f.Entries()
	if err != nil {
		return []error{err}
	}
	for _, m := range f.Models {
		if !bundlestore.IsRef(m.Bundle) {
			errs = append(errs, fmt.Errorf("%s line %d: model %s: bundle %q is a path: the nightly's pod has no shared volume; push it to the store (producer bundle push) and name its key", where, m.Line, m.Model, m.Bundle))
		} else if _, err := bundlestore.Key(m.Bundle, storeURL); err != nil {
			errs = append(errs, fmt.Errorf("%s line %d: model %s: %w", where, m.Line, m.Model, err))
		}
	}
	for _, e := range entries {
		if declared[0] != "" && !slices.Contains(declared, e.Target) {
			errs = append(errs, fmt.Errorf("%s line %d: model %s: target %s is not among the declared classes %v", where, e.Line, e.Model, e.Target, declared))
		}
		if e.Target == "cpu" {
			for _, cand := range e.Options.Candidates {
				if cand.Backend == "trt" {
					errs = append(errs, fmt.Errorf("%s line %d: model %s: candidate %s on target cpu: TensorRT needs a GPU target", where, e.Line, e.Model, cand))
				}
			}
		}
	}
	return errs
}

// pullable: a registry host ("ghcr.io/…", "registry:5000/…") and a tag
// that names a build (not dev or latest).
func pullable(ref string) bool {
	host, rest, ok := strings.Cut(ref, "/")
	if !ok || !strings.ContainsAny(host, ".:") && host != "localhost" {
		return false
	}
	_, tag, _ := strings.Cut(rest[strings.LastIndex(rest, "/")+1:], ":")
	tag, _, _ = strings.Cut(tag, "@")
	return tag != "" && tag != "dev" && tag != "latest"
}
