// Package deploycheck checks the deployment files against what the
// binaries accept, with the loaders the real tools use: the Dockerfiles
// under deploy/docker with BuildKit's parser, docker-compose.yml with
// compose-go (Docker Compose's own loader, schema validation on), and
// deploy/k8s with kustomize's krusty, every object decoded strictly into
// k8s.io/api types and KEDA objects validated against KEDA's CRD schema.
//
// Every command line a manifest gives our images goes through the real
// cobra trees of internal/cli (Find, ParseFlags, the argument validators),
// so a flag renamed in the CLI fails here before a cluster sees it, and
// every environment variable set for our binaries must be one they read
// (BinaryEnv, kept equal to what the source reads by a test).
//
// Beyond what parses, it checks what a real cluster would do with the
// manifests (docs/deploy-cluster.md): the API server's own Pod Security
// admission checks at level restricted (k8s.io/pod-security-admission's
// policy package), NetworkPolicy coverage, the three-way strategic merge
// patch `kubectl apply` would send for anything KEDA scales, GPU workers
// as KEDA ScaledJobs with trigger lengths equal to what one Job holds,
// placement an autoscaler can satisfy from zero nodes, grace periods
// against cluster-autoscaler's cap, scratch and ephemeral storage, Redis
// sized under its limit, declared target classes, fleet bundles in the
// store, and images a registry serves (docker-bake.hcl read with HCL).
// Each command line is parsed once by its binary's cobra tree (Command).
//
// Its tests also run the compose file's own commands as local processes
// (the stack-smoke test). The heavy modules it imports (buildkit,
// compose-go, kustomize, k8s.io/api, pod-security-admission, hcl) are imported by nothing the binaries
// link.
package deploycheck
