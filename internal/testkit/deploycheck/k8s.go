package deploycheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// Object is one object a kustomization renders, decoded strictly.
type Object struct {
	APIVersion, Kind, Name string
	JSON                   []byte // the object as JSON
	Typed                  any    // *appsv1.Deployment, …; nil for KEDA objects
}

func (o Object) String() string { return o.Kind + "/" + o.Name }

// builtin are the kinds deploy/k8s uses, each with the k8s.io/api type it
// must decode into and the apiVersion that type has.
var builtin = map[string]struct {
	apiVersion string
	new        func() any
}{
	"Namespace":             {"v1", func() any { return &corev1.Namespace{} }},
	"ConfigMap":             {"v1", func() any { return &corev1.ConfigMap{} }},
	"Secret":                {"v1", func() any { return &corev1.Secret{} }},
	"Service":               {"v1", func() any { return &corev1.Service{} }},
	"ServiceAccount":        {"v1", func() any { return &corev1.ServiceAccount{} }},
	"PersistentVolumeClaim": {"v1", func() any { return &corev1.PersistentVolumeClaim{} }},
	"Deployment":            {"apps/v1", func() any { return &appsv1.Deployment{} }},
	"StatefulSet":           {"apps/v1", func() any { return &appsv1.StatefulSet{} }},
	"CronJob":               {"batch/v1", func() any { return &batchv1.CronJob{} }},
	"PodDisruptionBudget":   {"policy/v1", func() any { return &policyv1.PodDisruptionBudget{} }},
	"NetworkPolicy":         {"networking.k8s.io/v1", func() any { return &networkingv1.NetworkPolicy{} }},
}

// Build renders a kustomization with kbuild (krusty, what `kubectl apply
// -k` runs; see kbuild's doc for why it is a process) and decodes every
// object strictly: a field the API type does not have, a wrong type or an
// unknown kind is an error naming the object.
func Build(kbuild, dir string) ([]Object, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(kbuild, dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w", strings.TrimSpace(stderr.String()), err)
	}
	r := k8syaml.NewYAMLReader(bufio.NewReader(&stdout))
	var objs []Object
	var errs []string
	for {
		doc, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		o, err := Decode(doc)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s %s: %v", dir, o, err))
			continue
		}
		objs = append(objs, o)
	}
	if len(errs) > 0 {
		return objs, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return objs, nil
}

// Decode decodes one object's YAML strictly into its API type.
func Decode(y []byte) (Object, error) {
	j, err := sigsyaml.YAMLToJSON(y)
	if err != nil {
		return Object{}, err
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct{ Name string }
	}
	if err := json.Unmarshal(j, &head); err != nil {
		return Object{}, err
	}
	o := Object{APIVersion: head.APIVersion, Kind: head.Kind, Name: head.Metadata.Name, JSON: j}
	if strings.HasPrefix(head.APIVersion, "keda.sh/") {
		if err := checkKEDA(o.String(), head.APIVersion, head.Kind, j); err != nil {
			return o, err
		}
		if head.Kind == "ScaledJob" {
			// The CRD schema has refused unknown fields; the pod template
			// is read into the API's own types for the pod checks.
			sj := &ScaledJob{}
			if err := json.Unmarshal(j, sj); err != nil {
				return o, err
			}
			o.Typed = sj
		}
		return o, nil
	}
	b, ok := builtin[head.Kind]
	if !ok {
		return o, fmt.Errorf("unknown kind %q (deploy/k8s uses %s)", head.Kind, strings.Join(sortedKeys(builtin), ", "))
	}
	if head.APIVersion != b.apiVersion {
		return o, fmt.Errorf("%s is served as apiVersion %s, not %s", head.Kind, b.apiVersion, head.APIVersion)
	}
	o.Typed = b.new()
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(o.Typed); err != nil {
		return o, fmt.Errorf("strict decoding into %T: %w", o.Typed, err)
	}
	return o, nil
}

// ReadEnvFile reads the keys of a KEY=VALUE file (comments and blank lines
// skipped): the keys of the Secret it documents.
func ReadEnvFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, _, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s line %d: want KEY=VALUE", path, n)
		}
		keys = append(keys, k)
	}
	return keys, sc.Err()
}
