package deploycheck

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
)

// secretsContract is what the manifests may reference: the keys of
// deploy/k8s/credentials.env.example, the Secret docs/deploy.md creates.
func secretsContract(t testing.TB, root string) map[string][]string {
	t.Helper()
	keys, err := ReadEnvFile(filepath.Join(root, "deploy/k8s/credentials.env.example"))
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]string{"tunefleet-credentials": keys}
}

// TestKustomize builds each overlay with krusty, decodes every object
// strictly and checks them (CheckK8s).
func TestKustomize(t *testing.T) {
	root := repoRoot(t)
	for _, tc := range []struct {
		overlay    string
		gpuClasses int
	}{{"cpu-only", 0}, {"gpu", 2}, {"gpu-redis-cluster", 2}, {"gpu-redis-sentinel", 2}} {
		t.Run(tc.overlay, func(t *testing.T) {
			objs, err := Build(kbuild(t), filepath.Join(root, "deploy/k8s/overlays", tc.overlay))
			if err != nil {
				t.Fatal(err)
			}
			wantClean(t, CheckK8s(objs, secretsContract(t, root)))
			var workers, web, scaled, nightly int
			for _, o := range objs {
				switch v := o.Typed.(type) {
				case *appsv1.Deployment:
					c := v.Spec.Template.Spec.Containers[0]
					switch Subcommand(append(c.Command, c.Args...)) {
					case "worker run":
						workers++
					case "producer serve":
						web++
					}
				case *batchv1.CronJob:
					if c := v.Spec.JobTemplate.Spec.Template.Spec.Containers[0]; Subcommand(append(c.Command, c.Args...)) == "producer nightly" {
						nightly++
					}
				}
				if sj, ok := o.Typed.(*ScaledJob); ok {
					if c := sj.Spec.JobTargetRef.Template.Spec.Containers[0]; Subcommand(append(c.Command, c.Args...)) == "worker run" {
						workers++
						scaled++
					}
				}
			}
			if workers != 1+tc.gpuClasses || web != 1 || scaled != tc.gpuClasses || nightly != 1 {
				t.Errorf("%s: %d workers, %d web UIs, %d ScaledJobs, %d nightly CronJobs; want %d, 1, %d, 1",
					tc.overlay, workers, web, scaled, nightly, 1+tc.gpuClasses, tc.gpuClasses)
			}
		})
	}
}

// TestKustomizeMistakes feeds mutated copies of deploy/k8s (in memory)
// through the same build and checks: each mistake is caught before a
// cluster sees it, with a message naming it.
func TestKustomizeMistakes(t *testing.T) {
	root := repoRoot(t)
	for _, tc := range []struct {
		name, file, old, new string
		want                 []string
	}{
		{"typo'd field", "base/worker-cpu.yaml", "readinessProbe:", "readinesProbe:", []string{"Deployment/tunefleet-worker-cpu", `unknown field "readinesProbe"`}},
		{"wrong type", "base/worker-cpu.yaml", "replicas: 2", `replicas: "two"`, []string{"Deployment/tunefleet-worker-cpu", "strict decoding"}},
		{"missing Secret key", "base/nightly.yaml", "key: AWS_SECRET_ACCESS_KEY", "key: AWS_SECRET_KEY", []string{"CronJob/tunefleet-nightly", `references key "AWS_SECRET_KEY" of Secret "tunefleet-credentials"`}},
		{"unknown Secret", "base/redis.yaml", "name: tunefleet-credentials", "name: redis-credentials", []string{`references Secret "redis-credentials"`}},
		{"GPU worker without a GPU limit", "overlays/gpu/worker-gpu-h100sxm.yaml", "                nvidia.com/gpu: 1\n", "", []string{"container worker: serves GPU class gpu.h100sxm but has no nvidia.com/gpu limit"}},
		{"placed on another class", "overlays/gpu/worker-gpu-l4.yaml", "values: [gpu.l4]", "values: [gpu.a100]", []string{"node affinity tunefleet.io/gpu-class In [gpu.a100], want In [gpu.l4]"}},
		{"renamed flag", "overlays/gpu/worker-gpu-h100sxm.yaml", `"--shutdown-timeout"`, `"--grace"`, []string{"unknown flag: --grace"}},
		{"grace shorter than shutdown", "base/worker-cpu.yaml", "terminationGracePeriodSeconds: 90", "terminationGracePeriodSeconds: 30", []string{"terminationGracePeriodSeconds 30s is not longer than --shutdown-timeout 1m0s"}},
		{"probe on another path", "base/worker-cpu.yaml", "path: /healthz", "path: /health", []string{"livenessProbe must GET /healthz on port 8081"}},
		{"KEDA typo", "overlays/gpu/worker-gpu-h100sxm.yaml", "minReplicaCount: 0", "minReplicas: 0", []string{"ScaledJob/tunefleet-worker-gpu-h100sxm", "KEDA's CRD schema refuses it", "minReplicas"}},
		{"KEDA on the wrong list", "overlays/gpu/worker-gpu-l4.yaml", `listName: "asynq:{gpu.l4}:pending"`, `listName: "asynq:{gpu.l4}:waiting"`, []string{`no redis trigger on listName "asynq:{gpu.l4}:pending"`}},
		{"KEDA metadata typo", "overlays/gpu/worker-gpu-l4.yaml", `listLength: "1"`, `listLenght: "1"`, []string{`no metadata key "listLenght"`}},
		{"embedded Secret", "base/namespace.yaml", "warn: restricted\n", "warn: restricted\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: leaked\nstringData:\n  AWS_SECRET_ACCESS_KEY: hunter2\n", []string{"a Secret is rendered into the manifests"}},
		{"typo'd kind", "base/worker-cpu.yaml", "kind: PodDisruptionBudget", "kind: PodDisruptionBudgett", []string{`unknown kind "PodDisruptionBudgett"`}},
		{"no PDB", "base/worker-cpu.yaml", "  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: tunefleet-worker\n      tunefleet.io/class: cpu", "  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: tunefleet-worker\n      tunefleet.io/class: cpu2", []string{"Deployment/tunefleet-worker-cpu: no PodDisruptionBudget selects its pods"}},
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
			cerrs := CheckK8s(objs, secretsContract(t, root))
			wantOneOf(t, append(errs, cerrs...), tc.want...)
		})
	}
}

// copyTree copies a directory tree into a new temporary directory.
func copyTree(t testing.TB, dir string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

var (
	kbuildOnce sync.Once
	kbuildPath string
	kbuildErr  error
)

// kbuild builds the kbuild command once per test binary, into a directory
// TestMain removes.
func kbuild(t testing.TB) string {
	t.Helper()
	kbuildOnce.Do(func() {
		kbuildPath = filepath.Join(binDir, "kbuild")
		out, err := exec.Command("go", "build", "-o", kbuildPath, "github.com/tunefleet/tunefleet/internal/testkit/deploycheck/kbuild").CombinedOutput()
		if err != nil {
			kbuildErr = fmt.Errorf("go build kbuild: %v\n%s", err, out)
		}
	})
	if kbuildErr != nil {
		t.Fatal(kbuildErr)
	}
	return kbuildPath
}
