package deploycheck

import (
	"fmt"
	"strconv"
)

// PendingList is the Redis list asynq keeps a queue's waiting tasks in:
// what a KEDA redis trigger measures.
func PendingList(queue string) string { return "asynq:{" + queue + "}:pending" }

// checkKEDA wants, for every GPU worker Deployment, a ScaledObject that
// scales it on its class's pending list down to zero, with a redis
// trigger KEDA understands and credentials from a documented Secret key.
func (c *k8sCheck) checkKEDA() {
	scaled := map[string]scaledObject{}
	auths := map[string]triggerAuth{}
	for _, o := range c.objs {
		switch o.Kind {
		case "ScaledObject":
			var so scaledObject
			if err := decodeLoose(o.JSON, &so); err != nil {
				c.errorf("%s: %w", o, err)
				continue
			}
			scaled[so.Spec.ScaleTargetRef.Name] = so
		case "TriggerAuthentication":
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
	}
	for _, dep := range sortedKeys(c.gpuWorkers) {
		class := c.gpuWorkers[dep]
		so, ok := scaled[dep]
		if !ok {
			c.errorf("Deployment/%s: serves GPU class %s but no KEDA ScaledObject scales it (GPU-hours idle otherwise)", dep, class)
			continue
		}
		c.checkScaledObject(so, class, auths)
	}
}

func (c *k8sCheck) checkScaledObject(so scaledObject, class string, auths map[string]triggerAuth) {
	where := "ScaledObject/" + so.Metadata.Name
	if so.Spec.MinReplicaCount == nil || *so.Spec.MinReplicaCount != 0 {
		c.errorf("%s: minReplicaCount must be 0, so that an idle class holds no GPU", where)
	}
	want := PendingList(class)
	found := false
	for i, t := range so.Spec.Triggers {
		tw := fmt.Sprintf("%s trigger %d", where, i)
		if t.Type != "redis" {
			continue
		}
		for k := range t.Metadata {
			if !redisScalerKeys[k] {
				c.errorf("%s: KEDA's redis scaler has no metadata key %q (it has: %v)", tw, k, sortedKeys(redisScalerKeys))
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
		found = found || t.Metadata["listName"] == want
	}
	if !found {
		c.errorf("%s: no redis trigger on listName %q, the pending list of class %s", where, want, class)
	}
}
