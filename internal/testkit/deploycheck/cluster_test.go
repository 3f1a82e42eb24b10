package deploycheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestClusterRules feeds mutated copies of deploy/k8s, each bringing back
// one defect of issue 20 as main had it, through the build and checks:
// each is refused with a message naming it.
func TestClusterRules(t *testing.T) {
	root := repoRoot(t)
	h100 := "overlays/gpu/worker-gpu-h100sxm.yaml"
	for _, tc := range []struct {
		name, file, old, new string
		want                 []string
	}{
		{"1 images no registry serves", "images/kustomization.yaml", "newName: ghcr.io/tunefleet/worker-gpu\n    newTag: \"0.1.0\"", "newName: tunefleet/worker-gpu\n    newTag: dev", []string{"image tunefleet/worker-gpu:dev is no registry's"}},
		{"2 not enforced", "base/namespace.yaml", "    pod-security.kubernetes.io/enforce: restricted\n", "", []string{"Namespace/tunefleet: label pod-security.kubernetes.io/enforce=restricted"}},
		{"2 no seccomp", "base/web.yaml", "        seccompProfile:\n          type: RuntimeDefault\n", "", []string{"Deployment/tunefleet-web", `Pod Security "restricted" forbids it`, "seccompProfile"}},
		{"2 escalation", "base/redis.yaml", "            allowPrivilegeEscalation: false\n", "", []string{"StatefulSet/tunefleet-redis", "allowPrivilegeEscalation"}},
		{"2 default token", "base/worker-cpu.yaml", "      automountServiceAccountToken: false\n", "", []string{"automountServiceAccountToken must be false"}},
		{"2 writable root", "base/worker-cpu.yaml", "            readOnlyRootFilesystem: true\n", "", []string{"readOnlyRootFilesystem must be true"}},
		{"2 Redis open to all", "base/networkpolicy.yaml", "    - from:\n        - podSelector:\n            matchExpressions:\n              - key: app.kubernetes.io/name\n                operator: In\n                values: [tunefleet-worker, tunefleet-web, tunefleet-nightly, tunefleet-submit]\n", "    - from: []\n", []string{"lets anyone reach Redis"}},
		{"2 client without Redis", "base/networkpolicy.yaml", "values: [tunefleet-worker, tunefleet-web, tunefleet-nightly, tunefleet-submit]\n      ports:\n        - port: 6379", "values: [tunefleet-worker, tunefleet-web, tunefleet-submit]\n      ports:\n        - port: 6379", []string{"CronJob/tunefleet-nightly: no NetworkPolicy lets it reach Redis"}},
		{"3 bundle on a volume", "overlays/gpu/fleet.yaml", "bundle: s3://tuning/bundles/demo_model", "bundle: bundles/demo_model", []string{`bundle "bundles/demo_model" is a path`}},
		{"3 bundle in another store", "overlays/gpu/fleet.yaml", "bundle: s3://tuning/bundles/demo_model", "bundle: s3://elsewhere/bundles/demo_model", []string{`"s3://elsewhere/bundles/demo_model" is not in the store s3://tuning/`}},
		{"4 no declared classes", "overlays/gpu/kustomization.yaml", "TUNEFLEET_CLASSES=cpu,gpu.h100sxm,gpu.l4", "TUNEFLEET_CLASSES=cpu", []string{"serves class gpu.h100sxm, which TUNEFLEET_CLASSES (cpu) does not declare"}},
		{"4 nightly without classes", "base/nightly.yaml", "                - configMapRef:\n                    name: tunefleet-classes\n", "", []string{"CronJob/tunefleet-nightly: producer nightly is not given TUNEFLEET_CLASSES"}},
		{"5 product required", h100, "- key: tunefleet.io/gpu-class\n                      operator: In\n                      values: [gpu.h100sxm]", "- key: nvidia.com/gpu.product\n                      operator: In\n                      values: [NVIDIA-H100-80GB-HBM3]", []string{"requires node label nvidia.com/gpu.product", "NotTriggerScaleUp"}},
		{"5 no GPU toleration", h100, "          - key: nvidia.com/gpu\n            operator: Exists\n", "", []string{"does not tolerate the nvidia.com/gpu taint"}},
		{"6 replicas on a scaled Deployment", "overlays/gpu/keda.yaml", "---\n# KEDA's operator", "---\napiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: cpu\nspec:\n  scaleTargetRef:\n    name: tunefleet-worker-cpu\n  triggers:\n    - type: cpu\n      metricType: Utilization\n      metadata:\n        value: \"80\"\n---\n# KEDA's operator", []string{"Deployment/tunefleet-worker-cpu (scaled by ScaledObject/cpu)", "sends spec.replicas=2 against a live count of 3"}},
		{"7 prefetch", h100, `"--prefetch", "0"`, `"--prefetch", "1"`, []string{"--max-tasks 1 --prefetch 1", "or it keeps a GPU"}},
		{"7 trigger length", h100, `listLength: "1"`, `listLength: "2"`, []string{"listLength 2, but one Job holds 1 tasks"}},
		{"8 default rollout", h100, "strategy: gradual", "strategy: immediate", []string{"deletes the running Jobs"}},
		{"8 over the autoscaler cap", h100, "terminationGracePeriodSeconds: 590", "terminationGracePeriodSeconds: 660", []string{"over cluster-autoscaler's 10m0s cap"}},
		{"8 evictable", h100, "          karpenter.sh/do-not-disrupt: \"true\"\n", "", []string{"no consolidation evicts it"}},
		{"8 no idle exit", h100, `"--idle-exit", "2m", `, "", []string{"without --idle-exit"}},
		{"9 no ephemeral storage", h100, "                ephemeral-storage: 40Gi\n", "", []string{"give ephemeral-storage requests and limits"}},
		{"9 unsized scratch", h100, "            emptyDir:\n              sizeLimit: 8Gi", "            emptyDir: {}", []string{"emptyDir tmp has no sizeLimit"}},
		{"10 no maxmemory", "base/redis.yaml", `"--maxmemory", "3gb", `, "", []string{"no --maxmemory"}},
		{"10 maxmemory at the limit", "base/redis.yaml", `"--maxmemory", "3gb"`, `"--maxmemory", "4gb"`, []string{"over 75% of the 4Gi memory limit"}},
		{"10 hard-coded namespace", "overlays/gpu/kustomization.yaml", "replacements:", "replacementsOff:", []string{`unknown field "replacementsOff"`}},
		{"11 mixed variants", h100, "values: [NVIDIA-H100-80GB-HBM3]", "values: [NVIDIA-H100-80GB-HBM3, NVIDIA-H100-PCIe, NVIDIA-H100-NVL]", []string{"admits 3 GPU products", "one class per GPU product"}},
		{"12 trt on cpu", "overlays/gpu/fleet.yaml", "targets: [gpu.h100sxm, gpu.l4]", "targets: [cpu, gpu.h100sxm, gpu.l4]", []string{"candidate trt:fp16 on target cpu"}},
		{"13 scratch in TMPDIR", h100, `"--work-dir", "/var/lib/tunefleet",`, "", []string{"without --work-dir", "TMPDIR"}},
		{"13 scratch on /tmp", "base/worker-cpu.yaml", `"--work-dir", "/var/lib/tunefleet"`, `"--work-dir", "/tmp"`, []string{"--work-dir /tmp: give the task scratch a volume of its own"}},
		{"13 scratch on the root filesystem", "base/worker-cpu.yaml", `"--work-dir", "/var/lib/tunefleet"`, `"--work-dir", "/var/lib/scratch"`, []string{"--work-dir /var/lib/scratch is no volume's mount path"}},
		{"13 work volume under a bundle", "base/worker-cpu.yaml", "sizeLimit: 20Gi", "sizeLimit: 4Gi", []string{"volume work of 4Gi, under the largest bundle a producer accepts (8Gi"}},
		{"14 liveness on Redis", h100, "livenessProbe:\n              httpGet:\n                path: /healthz", "livenessProbe:\n              httpGet:\n                path: /readyz", []string{"livenessProbe must GET /healthz"}},
		{"14 readiness not on Redis", "base/worker-cpu.yaml", "readinessProbe:\n            httpGet:\n              path: /readyz", "readinessProbe:\n            httpGet:\n              path: /healthz", []string{"readinessProbe must GET /readyz"}},
		{"15 nightly retried in place", "base/nightly.yaml", "restartPolicy: Never", "restartPolicy: OnFailure", []string{"restartPolicy \"OnFailure\"", "needs Never"}},
		{"15 bad input retried", "base/nightly.yaml", "values: [2]", "values: [3]", []string{"no podFailurePolicy rule FailJob on exit code 2"}},
		{"16 pending forever", h100, "    activeDeadlineSeconds: 10800\n", "", []string{"activeDeadlineSeconds unset", "stays Pending forever"}},
		{"16 deadline cuts a build", h100, "activeDeadlineSeconds: 10800", "activeDeadlineSeconds: 3600", []string{"activeDeadlineSeconds 3600 (1h0m0s) is under the longest task the fleet sends class gpu.h100sxm plus --shutdown-timeout (2h19m0s)"}},
		{"12 tag-only pin", "base/redis.yaml", "redis:7-bookworm@sha256:595cc6f2bb3af6e03347b90deb6123c6aa2c81dea05ce08128de8a174b6ac67b", "redis:7-bookworm", []string{"image redis:7-bookworm is not pinned by digest"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each renders with its own kbuild process
			dir := copyTree(t, filepath.Join(root, "deploy/k8s"))
			file := filepath.Join(dir, tc.file)
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(mutate(t, string(raw), tc.old, tc.new)), 0o644); err != nil {
				t.Fatal(err)
			}
			objs, err := Build(kbuild(t), filepath.Join(dir, "overlays/gpu"))
			var errs []error
			if err != nil {
				errs = append(errs, err)
			}
			wantOneOf(t, append(errs, CheckK8s(objs, secretsContract(t, root))...), tc.want...)
		})
	}
}

// TestOverlayInAnotherNamespace renders the GPU overlay into another
// namespace: every object and KEDA's Redis address follow (issue 20 item 10/12).
func TestOverlayInAnotherNamespace(t *testing.T) {
	root := repoRoot(t)
	dir := copyTree(t, filepath.Join(root, "deploy/k8s"))
	file := filepath.Join(dir, "overlays/gpu/kustomization.yaml")
	raw, _ := os.ReadFile(file)
	os.WriteFile(file, []byte(mutate(t, string(raw), "\nnamespace: tunefleet\n", "\nnamespace: ml-tuning\n")), 0o644)
	objs, err := Build(kbuild(t), filepath.Join(dir, "overlays/gpu"))
	if err != nil {
		t.Fatal(err)
	}
	wantClean(t, CheckK8s(objs, secretsContract(t, root)))
	n := 0
	for _, o := range objs {
		if sj, ok := o.Typed.(*ScaledJob); ok {
			for _, tr := range sj.Spec.Triggers {
				n++
				if tr.Metadata["address"] != "tunefleet-redis.ml-tuning.svc:6379" {
					t.Errorf("%s: address %q in namespace ml-tuning", o, tr.Metadata["address"])
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no ScaledJob trigger rendered")
	}
}

// TestImagesFromOnePlace runs `make set-image` on a copy of deploy/k8s and
// renders both overlays: every one of our images is then
// REGISTRY/NAME:TAG, and docker-bake.hcl tags its targets from the same
// REGISTRY and TAG variables whose defaults the images component holds.
func TestImagesFromOnePlace(t *testing.T) {
	root := repoRoot(t)
	comp, err := os.ReadFile(filepath.Join(root, "deploy/k8s/images/kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range []map[string]string{nil, {"REGISTRY": "registry.example.com:5000/ml", "TAG": "2026.12.02"}} {
		targets, err := LoadBake(filepath.Join(root, "docker-bake.hcl"), env)
		if err != nil {
			t.Fatal(err)
		}
		registry, tag := "ghcr.io/tunefleet", "0.1.0" // the images component's
		if env != nil {
			registry, tag = env["REGISTRY"], env["TAG"]
		}
		byName := map[string]BakeTarget{}
		for _, bt := range targets {
			byName[bt.Name] = bt
		}
		for _, name := range ourImages {
			bt, ok := byName[name]
			if !ok || len(bt.Tags) != 1 || bt.Tags[0] != registry+"/"+name+":"+tag {
				t.Errorf("docker-bake.hcl (env %v): target %s tags %v, want [%s/%s:%s]", env, name, bt.Tags, registry, name, tag)
			}
			if bt.Dockerfile != "deploy/docker/"+name+".Dockerfile" {
				t.Errorf("docker-bake.hcl: target %s builds %q", name, bt.Dockerfile)
			}
			if bt.Context != "." || bt.Args["VERSION"] != tag || !slices.Equal(bt.Platforms, []string{"linux/amd64"}) {
				t.Errorf("docker-bake.hcl: target %s: context %q, args %v, platforms %v: want the shared ones (context ., VERSION = TAG, linux/amd64)", name, bt.Context, bt.Args, bt.Platforms)
			}
			if env == nil && !strings.Contains(string(comp), "name: tunefleet/"+name+"\n    newName: "+registry+"/"+name+"\n    newTag: \""+tag+"\"\n") {
				t.Errorf("deploy/k8s/images: tunefleet/%s is not rewritten to the bake default %s/%s:%s", name, registry, name, tag)
			}
		}
	}
	dir := copyTree(t, filepath.Join(root, "deploy/k8s"))
	mk := exec.Command("make", "-s", "set-image", "REGISTRY=registry.example.com:5000/ml", "TAG=2026.12.02", "K8S_IMAGES="+filepath.Join(dir, "images/kustomization.yaml"))
	mk.Dir = root
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make set-image: %v\n%s", err, out)
	}
	for _, overlay := range []string{"cpu-only", "gpu"} {
		objs, err := Build(kbuild(t), filepath.Join(dir, "overlays", overlay))
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, p := range (&k8sCheck{objs: objs}).pods() {
			for _, c := range p.spec.Containers {
				if !isOurImage(c.Image) {
					continue
				}
				seen++
				name := c.Image[strings.LastIndex(c.Image, "/")+1 : strings.LastIndex(c.Image, ":")]
				if want := "registry.example.com:5000/ml/" + name + ":2026.12.02"; c.Image != want {
					t.Errorf("%s %s: image %s, want %s", overlay, p.where, c.Image, want)
				}
			}
		}
		if seen < 3 {
			t.Errorf("%s: %d of our images rendered", overlay, seen)
		}
	}
}
