package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
)

// KEDAEnv names KEDA's operator binary (what .ci/keda-build prints); the
// CRDs of the same version lie in crds/ beside it.
const KEDAEnv = "TUNEFLEET_KEDA"

// KEDANamespace is where KEDA's Helm chart installs the operator: its own
// namespace (leader election, ClusterTriggerAuthentication secrets), not
// the one it watches.
const KEDANamespace = "keda"

// StartKEDA installs KEDA's CRDs from its build and runs its operator
// against the plane, watching namespace, with what a cluster gives it
// replaced by loopback: the plane's kubeconfig for the in-cluster
// credentials, no leader election, no Prometheus or health listeners. Its
// metrics gRPC service (what KEDA's metrics API server asks for
// ScaledObjects) needs a certificate even unused; the plane's self-signed
// one serves. It returns the operator's log, printed when the test fails.
func (p *Plane) StartKEDA(t testing.TB, namespace string) *testsvc.SyncBuffer {
	t.Helper()
	bin := os.Getenv(KEDAEnv)
	if _, err := os.Stat(bin); bin == "" || err != nil {
		t.Fatalf("KEDA's operator %q: %v: build it with .ci/keda-build and set $%s to the path it prints (make test-cluster does both)", bin, err, KEDAEnv)
	}
	crds, _ := filepath.Glob(filepath.Join(filepath.Dir(bin), "crds", "*.yaml"))
	if len(crds) == 0 {
		t.Fatalf("no CRDs in %s: .ci/keda-build copies them beside the operator", filepath.Join(filepath.Dir(bin), "crds"))
	}
	ctx := context.Background()
	var names []string
	for _, f := range crds {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		if err := sigsyaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := p.Apply(ctx, "CustomResourceDefinition", "", m.Metadata.Name, doc); err != nil {
			t.Fatalf("KEDA's CRD %s: %v", f, err)
		}
		names = append(names, m.Metadata.Name)
	}
	// The operator watches every kind it owns from the start and stops
	// when one is not served yet.
	for _, n := range names {
		poll(t, time.Minute, "KEDA's CRD "+n+" established", func() (bool, string) {
			code, b, err := p.Do(ctx, "GET", Resources["CustomResourceDefinition"].Path("", n), "", nil)
			if err != nil || code != 200 {
				return false, fmt.Sprintf("%d %s %v", code, b, err)
			}
			var crd struct {
				Status struct {
					Conditions []struct{ Type, Status string } `json:"conditions"`
				} `json:"status"`
			}
			json.Unmarshal(b, &crd)
			for _, c := range crd.Status.Conditions {
				if c.Type == "Established" && c.Status == "True" {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", crd.Status.Conditions)
		})
	}

	certs := t.TempDir()
	for dst, src := range map[string]string{"tls.crt": p.certFile, "tls.key": p.keyFile, "ca.crt": p.certFile} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(certs, dst), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p.startEnv(t, "keda-operator", bin, []string{
		"KUBECONFIG=" + p.Kubeconfig,
		"WATCH_NAMESPACE=" + namespace,
		"POD_NAMESPACE=" + KEDANamespace,
		"KEDA_CLUSTER_OBJECT_NAMESPACE=" + KEDANamespace,
	},
		"--leader-elect=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--metrics-service-bind-address=127.0.0.1:"+strconv.Itoa(freePort(t)),
		"--cert-dir="+certs, "--ca-dir="+certs,
		"--zap-encoder=json", "--zap-log-level=info", "--zap-time-encoding=rfc3339nano")
	return p.Logs["keda-operator"]
}

// poll calls f until it says done, failing the test after limit with
// f's last note: a limit on waiting for the control plane, not a speed
// target.
func poll(t testing.TB, limit time.Duration, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		done, note := f()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s; last: %s", what, limit, note)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
