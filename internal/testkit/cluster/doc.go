// Package cluster is the cluster tier (`make test-cluster`): deploy/k8s
// against a real control plane on loopback, Debian's etcd with a
// kube-apiserver and kube-controller-manager built from the Go module
// k8s.io/kubernetes (.ci/kube-build, cached under third_party/kube/). There
// is no kubelet, so pods stay Pending; what runs is what manifests meet
// first in a cluster: the API server's defaulting, validation and admission
// (Pod Security enforcing restricted on the namespace), server-side apply
// and its re-apply, and the ReplicaSet, StatefulSet, Job and CronJob
// controllers creating pods that admission must accept. KEDA's operator,
// built from its Go module (.ci/keda-build, cached under third_party/keda/),
// runs against the plane too (StartKEDA), the ScaledJobs' Redis trigger on
// a real redis-server: no Job while the queue is empty, one per task once
// tasks arrive.
//
// Its tests carry the build tag `cluster`: the binaries take tens of
// minutes to build, so `make test` does not run them, and CI runs them
// only when deploy/ or the tier's inputs change (.ci/cluster-tier).
//
// It imports the module's test kits and, in its tests, asynq, go-redis and
// jobs' task types (to enqueue as the producer does); nothing that ships
// imports it.
package cluster
