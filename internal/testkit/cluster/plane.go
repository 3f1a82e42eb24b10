package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
)

// BinEnv names the directory holding kube-apiserver and
// kube-controller-manager (what .ci/kube-build prints).
const BinEnv = "TUNEFLEET_KUBE_BIN"

// Plane is a running control plane: etcd, kube-apiserver and
// kube-controller-manager on loopback, stopped when the test ends.
type Plane struct {
	URL        string // https://127.0.0.1:PORT
	Kubeconfig string // a kubeconfig with the admin token, for clients of the plane (the controller manager, KEDA)
	token      string
	http       *http.Client
	Logs       map[string]*testsvc.SyncBuffer
	// The API server's self-signed certificate and key: KEDA's operator
	// serves its metrics gRPC with them (see StartKEDA).
	certFile, keyFile string
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Start starts a control plane for t. etcd is Debian's etcd-server; the
// other two come from $TUNEFLEET_KUBE_BIN.
func Start(t testing.TB) *Plane {
	t.Helper()
	bin := os.Getenv(BinEnv)
	for _, b := range []string{"kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("%s: %v: build them with .ci/kube-build and set $%s to the directory it prints (make test-cluster does both)", b, err, BinEnv)
		}
	}
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatalf("etcd: %v (apt-get install etcd-server)", err)
	}
	dir := t.TempDir()
	p := &Plane{token: "tunefleet-" + strconv.FormatInt(time.Now().UnixNano(), 36), Logs: map[string]*testsvc.SyncBuffer{}}

	cert, key := selfSigned(t, dir)
	p.certFile, p.keyFile = cert, key
	saKey := filepath.Join(dir, "sa.key")
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, saKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(k))
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(p.token+",admin,admin,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	ec, ep := freePort(t), freePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ec)
	p.start(t, "etcd", etcd, "--data-dir", filepath.Join(dir, "etcd"), "--name", "tf",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", ep),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", ep),
		"--initial-cluster", fmt.Sprintf("tf=http://127.0.0.1:%d", ep))

	port := freePort(t)
	p.URL = fmt.Sprintf("https://127.0.0.1:%d", port)
	p.start(t, "kube-apiserver", filepath.Join(bin, "kube-apiserver"),
		"--etcd-servers", etcdURL, "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port), "--cert-dir", filepath.Join(dir, "certs"),
		"--tls-cert-file", cert, "--tls-private-key-file", key, "--client-ca-file", cert,
		"--token-auth-file", tokens, "--authorization-mode", "RBAC",
		"--service-account-key-file", saKey, "--service-account-signing-key-file", saKey,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-cluster-ip-range", "10.96.0.0/16",
		// PodSecurity is what the namespace's enforce label asks of.
		"--enable-admission-plugins", "NamespaceLifecycle,LimitRanger,ServiceAccount,PodSecurity,DefaultStorageClass,ResourceQuota,MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
		"--allow-privileged=false")
	p.http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	p.waitReady(t)

	kubeconfig := filepath.Join(dir, "kubeconfig")
	p.Kubeconfig = kubeconfig
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: tf, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: tf, context: {cluster: tf, user: admin}}]
current-context: tf
`, p.URL, p.token)
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	p.start(t, "kube-controller-manager", filepath.Join(bin, "kube-controller-manager"),
		"--kubeconfig", kubeconfig, "--leader-elect=false", "--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(freePort(t)), "--service-account-private-key-file", saKey,
		"--root-ca-file", cert, "--use-service-account-credentials=false", "--controllers", "*")
	return p
}

// start runs a server, killed (with its group) when the test ends; its
// log is printed when the test failed.
func (p *Plane) start(t testing.TB, name, exe string, args ...string) {
	t.Helper()
	p.startEnv(t, name, exe, nil, args...)
}

// startEnv is start with env added to the test's environment.
func (p *Plane) startEnv(t testing.TB, name, exe string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(exe, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	log := &testsvc.SyncBuffer{}
	p.Logs[name] = log
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if t.Failed() {
			s := log.String()
			if len(s) > 6000 {
				s = s[len(s)-6000:]
			}
			t.Logf("%s log (last lines):\n%s", name, s)
		}
	})
}

func (p *Plane) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		code, body, err := p.Do(context.Background(), "GET", "/readyz", "", nil)
		if err == nil && code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver not ready after 3m: %d %s %v", code, body, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// Do sends one request with the admin token.
func (p *Plane) Do(ctx context.Context, method, path, contentType string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, p.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Get decodes a GET's JSON into v.
func (p *Plane) Get(t testing.TB, path string, v any) {
	t.Helper()
	code, b, err := p.Do(context.Background(), "GET", path, "", nil)
	if err != nil || code != 200 {
		t.Fatalf("GET %s: %d %s %v", path, code, b, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

func selfSigned(t testing.TB, dir string) (certFile, keyFile string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tunefleet-cluster-tier"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(k))
	return certFile, keyFile
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Resource is where the API serves a kind.
type Resource struct {
	Group, Version, Plural string
	Namespaced             bool
}

// Resources are the kinds deploy/k8s renders (and the CRDs KEDA's come in).
var Resources = map[string]Resource{
	"Namespace":                {"", "v1", "namespaces", false},
	"ServiceAccount":           {"", "v1", "serviceaccounts", true},
	"ConfigMap":                {"", "v1", "configmaps", true},
	"Secret":                   {"", "v1", "secrets", true},
	"Service":                  {"", "v1", "services", true},
	"PersistentVolumeClaim":    {"", "v1", "persistentvolumeclaims", true},
	"Deployment":               {"apps", "v1", "deployments", true},
	"StatefulSet":              {"apps", "v1", "statefulsets", true},
	"CronJob":                  {"batch", "v1", "cronjobs", true},
	"Job":                      {"batch", "v1", "jobs", true},
	"PodDisruptionBudget":      {"policy", "v1", "poddisruptionbudgets", true},
	"NetworkPolicy":            {"networking.k8s.io", "v1", "networkpolicies", true},
	"ScaledJob":                {"keda.sh", "v1alpha1", "scaledjobs", true},
	"ScaledObject":             {"keda.sh", "v1alpha1", "scaledobjects", true},
	"TriggerAuthentication":    {"keda.sh", "v1alpha1", "triggerauthentications", true},
	"CustomResourceDefinition": {"apiextensions.k8s.io", "v1", "customresourcedefinitions", false},
}

// Path is the URL path of an object (name "" for its collection).
func (r Resource) Path(namespace, name string) string {
	p := "/api/" + r.Version
	if r.Group != "" {
		p = "/apis/" + r.Group + "/" + r.Version
	}
	if r.Namespaced {
		p += "/namespaces/" + namespace
	}
	p += "/" + r.Plural
	if name != "" {
		p += "/" + name
	}
	return p
}

// Apply server-side applies one object (JSON or YAML) as fieldManager and
// returns the object the server stored.
func (p *Plane) Apply(ctx context.Context, kind, namespace, name string, doc []byte) (map[string]any, error) {
	r, ok := Resources[kind]
	if !ok {
		return nil, fmt.Errorf("%s/%s: kind unknown to the cluster tier (add it to Resources)", kind, name)
	}
	code, b, err := p.Do(ctx, "PATCH", r.Path(namespace, name)+"?fieldManager=tunefleet-cluster-tier&force=true", "application/apply-patch+yaml", doc)
	if err != nil {
		return nil, fmt.Errorf("apply %s/%s: %w", kind, name, err)
	}
	if code/100 != 2 {
		return nil, fmt.Errorf("apply %s/%s: %d %s", kind, name, code, strings.TrimSpace(string(b)))
	}
	var out map[string]any
	return out, json.Unmarshal(b, &out)
}
