package deploycheck

import (
	"embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// kedaCRDs are KEDA's own CRDs (testdata/keda/SOURCE.md says from where).
//
//go:embed testdata/keda/*.yaml
var kedaCRDs embed.FS

var kedaSchemas = sync.OnceValues(loadKEDASchemas)

// loadKEDASchemas compiles the openAPIV3Schema of each KEDA CRD version
// into a JSON Schema keyed "apiVersion/Kind".
func loadKEDASchemas() (map[string]*jsonschema.Schema, error) {
	files, err := kedaCRDs.ReadDir("testdata/keda")
	if err != nil {
		return nil, err
	}
	out := map[string]*jsonschema.Schema{}
	for _, f := range files {
		raw, err := kedaCRDs.ReadFile("testdata/keda/" + f.Name())
		if err != nil {
			return nil, err
		}
		var crd struct {
			Spec struct {
				Group string
				Names struct{ Kind string }
				// Versions' schemas are read as plain JSON values.
				Versions []struct {
					Name   string
					Schema struct {
						OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
					}
				}
			}
		}
		if err := sigsyaml.Unmarshal(raw, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name(), err)
		}
		for _, v := range crd.Spec.Versions {
			key := crd.Spec.Group + "/" + v.Name + "/" + crd.Spec.Names.Kind
			c := jsonschema.NewCompiler()
			if err := c.AddResource(key, strictSchema(v.Schema.OpenAPIV3Schema)); err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			s, err := c.Compile(key)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			out[key] = s
		}
	}
	return out, nil
}

// strictSchema turns a CRD's structural schema into JSON Schema that
// refuses unknown fields, as the API server's strict field validation
// does: an object with properties and no additionalProperties or
// x-kubernetes-preserve-unknown-fields gets additionalProperties: false,
// and x-kubernetes-int-or-string becomes integer-or-string.
func strictSchema(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			out[k] = strictSchema(x)
		}
		if _, ok := v["properties"]; ok {
			_, ap := v["additionalProperties"]
			if keep, _ := v["x-kubernetes-preserve-unknown-fields"].(bool); !ap && !keep {
				out["additionalProperties"] = false
			}
		}
		if ios, _ := v["x-kubernetes-int-or-string"].(bool); ios {
			delete(out, "type")
			out["anyOf"] = []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = strictSchema(x)
		}
		return out
	}
	return v
}

// checkKEDA validates one KEDA object against its CRD schema.
func checkKEDA(where, apiVersion, kind string, obj []byte) error {
	schemas, err := kedaSchemas()
	if err != nil {
		return err
	}
	s, ok := schemas[apiVersion+"/"+kind]
	if !ok {
		return fmt.Errorf("%s: no KEDA CRD serves %s %s (known: %s)", where, apiVersion, kind, strings.Join(sortedKeys(schemas), ", "))
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(obj)))
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if err := s.Validate(inst); err != nil {
		return fmt.Errorf("%s: KEDA's CRD schema refuses it: %w", where, err)
	}
	return nil
}

// redisScalerKeys are the metadata keys of KEDA's redis list scalers
// (pkg/scalers/redis_scaler.go; keda.sh/docs/2.21/scalers/redis-lists,
// redis-cluster-lists, redis-sentinel-lists) by trigger type; the CRD
// leaves trigger metadata free-form, so a typo there would otherwise reach
// KEDA and fail at run time.
var redisScalerKeys = map[string]map[string]bool{
	"redis": keySet("address", "addressFromEnv", "host", "hostFromEnv", "port", "portFromEnv",
		"username", "usernameFromEnv", "passwordFromEnv", "databaseIndex",
		"listName", "listLength", "activationListLength", "enableTLS", "unsafeSsl"),
	"redis-cluster": keySet("addresses", "addressesFromEnv", "hosts", "hostsFromEnv", "ports", "portsFromEnv",
		"usernameFromEnv", "passwordFromEnv", "databaseIndex",
		"listName", "listLength", "activationListLength", "enableTLS", "unsafeSsl"),
	"redis-sentinel": keySet("addresses", "addressesFromEnv", "hosts", "hostsFromEnv", "ports", "portsFromEnv",
		"usernameFromEnv", "passwordFromEnv", "sentinelUsernameFromEnv", "sentinelPasswordFromEnv",
		"sentinelMaster", "sentinelMasterFromEnv", "databaseIndex",
		"listName", "listLength", "activationListLength", "enableTLS", "unsafeSsl"),
}

func keySet(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// scaledObject is the part of a KEDA ScaledObject deploycheck reasons about.
type scaledObject struct {
	Metadata struct{ Name string }
	Spec     struct {
		ScaleTargetRef  struct{ Kind, Name string }
		MinReplicaCount *int32
		MaxReplicaCount *int32
		Triggers        []kedaTrigger
	}
}

// kedaTrigger is one trigger of a ScaledObject or ScaledJob.
type kedaTrigger struct {
	Type              string
	Metadata          map[string]string
	AuthenticationRef *struct{ Name, Kind string }
}

// ScaledJob is the part of a KEDA ScaledJob deploycheck reasons about; its
// pod template is decoded into the API's own Job type.
type ScaledJob struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		JobTargetRef    batchv1.JobSpec `json:"jobTargetRef"`
		MinReplicaCount *int32          `json:"minReplicaCount"`
		MaxReplicaCount *int32          `json:"maxReplicaCount"`
		ScalingStrategy struct {
			Strategy             string   `json:"strategy"`
			PendingPodConditions []string `json:"pendingPodConditions"`
		} `json:"scalingStrategy"`
		Rollout struct {
			Strategy string `json:"strategy"`
		} `json:"rollout"`
		Triggers []kedaTrigger `json:"triggers"`
	} `json:"spec"`
}

// triggerAuth is the part of a KEDA TriggerAuthentication with secrets.
type triggerAuth struct {
	Metadata struct{ Name string }
	Spec     struct {
		SecretTargetRef []struct{ Parameter, Name, Key string }
	}
}

func decodeLoose(obj []byte, into any) error { return json.Unmarshal(obj, into) }

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
