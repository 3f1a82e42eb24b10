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

# What every image shares; each target inherits it and names its own
# Dockerfile and tag.
target "_common" {
  context   = "."
  args      = { VERSION = TAG, REVISION = REVISION }
  platforms = ["linux/amd64"]
}

target "producer" {
  inherits   = ["_common"]
  dockerfile = "deploy/docker/producer.Dockerfile"
  tags       = ["${REGISTRY}/producer:${TAG}"]
}

target "worker-cpu" {
  inherits   = ["_common"]
  dockerfile = "deploy/docker/worker-cpu.Dockerfile"
  tags       = ["${REGISTRY}/worker-cpu:${TAG}"]
}

target "worker-gpu" {
  inherits   = ["_common"]
  dockerfile = "deploy/docker/worker-gpu.Dockerfile"
  tags       = ["${REGISTRY}/worker-gpu:${TAG}"]
}
