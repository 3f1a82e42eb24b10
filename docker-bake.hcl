# The images a cluster pulls: `make images REGISTRY=… TAG=…` runs
#   docker buildx bake --push   (REGISTRY and TAG from the environment)
# and `make set-image` writes the same REGISTRY and TAG into
# deploy/k8s/images/kustomization.yaml. internal/testkit/deploycheck parses
# this file with HCL and checks the tags against that kustomization.
variable "REGISTRY" {
  default = "ghcr.io/tunefleet"
}

variable "TAG" {
  default = "0.1.0"
}

variable "REVISION" {
  default = "unknown"
}

group "default" {
  targets = ["producer", "worker-cpu", "worker-gpu"]
}

target "producer" {
  context    = "."
  dockerfile = "deploy/docker/producer.Dockerfile"
  tags       = ["${REGISTRY}/producer:${TAG}"]
  args       = { VERSION = TAG, REVISION = REVISION }
  platforms  = ["linux/amd64"]
}

target "worker-cpu" {
  context    = "."
  dockerfile = "deploy/docker/worker-cpu.Dockerfile"
  tags       = ["${REGISTRY}/worker-cpu:${TAG}"]
  args       = { VERSION = TAG, REVISION = REVISION }
  platforms  = ["linux/amd64"]
}

target "worker-gpu" {
  context    = "."
  dockerfile = "deploy/docker/worker-gpu.Dockerfile"
  tags       = ["${REGISTRY}/worker-gpu:${TAG}"]
  args       = { VERSION = TAG, REVISION = REVISION }
  platforms  = ["linux/amd64"]
}
