package deploycheck

import (
	"os"
	"path/filepath"
	"testing"
)

// The overlays on a Redis Cluster or Sentinel of one's own: a KEDA trigger
// that measures another Redis than the workers use, or that KEDA's scaler
// cannot read, is caught before a cluster sees it.
func TestKustomizeTopologyMistakes(t *testing.T) {
	root := repoRoot(t)
	const cluster, sentinel = "components/redis-cluster/kustomization.yaml", "components/redis-sentinel/kustomization.yaml"
	for _, tc := range []struct {
		name, overlay, file, old, new string
		want                          []string
	}{
		{"cluster node missing from KEDA", "gpu-redis-cluster", cluster, ",redis-cluster-2.redis-cluster-headless.redis.svc:6379\n", "\n",
			[]string{"are not the nodes TUNEFLEET_REDIS names"}},
		{"cluster trigger on a single Redis URL", "gpu-redis-cluster", cluster, "      - TUNEFLEET_REDIS=redis+cluster://", "      - TUNEFLEET_REDIS=redis://",
			[]string{"not a redis+cluster:// URL"}},
		{"cluster trigger with address", "gpu-redis-cluster", cluster, "path: /spec/triggers/0/metadata/addresses", "path: /spec/triggers/0/metadata/address",
			[]string{`KEDA's redis-cluster scaler has no metadata key "address"`}},
		{"sentinel master differs", "gpu-redis-sentinel", sentinel, "        value: mymaster", "        value: othermaster",
			[]string{`sentinelMaster "othermaster" is not TUNEFLEET_REDIS's master_name "mymaster"`}},
		{"sentinel master typo", "gpu-redis-sentinel", sentinel, "path: /spec/triggers/0/metadata/sentinelMaster", "path: /spec/triggers/0/metadata/sentinelMasterName",
			[]string{`no metadata key "sentinelMasterName"`}},
		{"sentinel port not a port", "gpu-redis-sentinel", sentinel, "value: redis-node-0.redis-headless.redis.svc:26379,", "value: redis-node-0.redis-headless.redis.svc,",
			[]string{`"redis-node-0.redis-headless.redis.svc" is not host:port`}},
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
			objs, err := Build(kbuild(t), filepath.Join(dir, "overlays", tc.overlay))
			var errs []error
			if err != nil {
				errs = append(errs, err)
			}
			wantOneOf(t, append(errs, CheckK8s(objs, secretsContract(t, root))...), tc.want...)
		})
	}
}
