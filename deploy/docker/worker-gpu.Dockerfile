# syntax=docker/dockerfile:1
# The GPU worker image: `worker` on an NVIDIA TensorRT container, which
# brings trtexec, TensorRT and CUDA; NVML and the driver come from the host
# through the NVIDIA Container Toolkit. Build from the repository root:
#   docker build -f deploy/docker/worker-gpu.Dockerfile -t tunefleet/worker-gpu:trt10 .
#
# TENSORRT_IMAGE picks the TensorRT version: one NGC release per TensorRT
# major, always as tag@digest (deploycheck rejects an unpinned default; look
# a digest up with `docker buildx imagetools inspect nvcr.io/nvidia/tensorrt:TAG`):
#   TensorRT 10.x: nvcr.io/nvidia/tensorrt:24.09-py3 (TensorRT 10.4), the default below
#   TensorRT 8.6:  nvcr.io/nvidia/tensorrt:23.12-py3 (TensorRT 8.6.1)
#   TensorRT 11.x: the NGC release whose notes name TensorRT 11 (tunefleet drives
#                  11.x's trtexec; no 11.x image has been pinned here yet)
#   e.g. --build-arg TENSORRT_IMAGE=nvcr.io/nvidia/tensorrt:23.12-py3@sha256:<digest>
# Workers of different TensorRT versions serve the same class side by side:
# their platform keys differ, so their results never mix.
ARG GO_IMAGE=golang:1.26-bookworm@sha256:9fdc884aacc3bec89b20ffc69f4bb369c78210e3e4f600387b5128b12c199f81
ARG NODE_IMAGE=node:22-bookworm@sha256:363e1587494626837fa7f9a23bdb453d13b0ff3c67c705c2805cfc69c2d2fad7
ARG TENSORRT_IMAGE=nvcr.io/nvidia/tensorrt:24.09-py3@sha256:832dd68095a66693aafe6d854c9c8a8e7046965ea4df40ecfa571ee0fefe59e1

# ONNX Runtime (ort: candidates and the CPU reference runs) through the
# Makefile's `ort` target: npm pack, sha256 of tarball and library checked.
FROM ${NODE_IMAGE} AS ort
WORKDIR /src
COPY Makefile ./
COPY internal/testkit/realmodels/models.tsv internal/testkit/realmodels/
RUN make ort

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=1 go build -trimpath -o /out/worker ./cmd/worker

FROM ${TENSORRT_IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
ARG TENSORRT_IMAGE
LABEL org.opencontainers.image.title="tunefleet worker (GPU, TensorRT)" \
      org.opencontainers.image.description="Builds, checks and benchmarks TensorRT and ONNX Runtime engines from the tunefleet queue" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/tunefleet/tunefleet" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${TENSORRT_IMAGE}"
# trtexec is where the NGC release put it; the worker finds it on PATH. A
# base without one fails the build here, not the first task.
RUN set -eu; t="$(command -v trtexec || true)"; \
    for c in /opt/tensorrt/bin/trtexec /usr/src/tensorrt/bin/trtexec /workspace/tensorrt/bin/trtexec; do \
      if [ -z "$t" ] && [ -x "$c" ]; then t="$c"; fi; done; \
    if [ -z "$t" ]; then echo "no trtexec in ${TENSORRT_IMAGE}" >&2; exit 1; fi; \
    ln -sf "$t" /usr/local/bin/trtexec; \
    useradd --system --uid 10001 --user-group --home-dir /var/lib/tunefleet --create-home tunefleet
COPY --from=ort /src/third_party/onnxruntime/lib/ /opt/onnxruntime/lib/
COPY --from=build /out/worker /usr/local/bin/worker
COPY LICENSE NOTICE /usr/share/doc/tunefleet/
ENV ONNXRUNTIME_SHARED_LIBRARY_PATH=/opt/onnxruntime/lib/libonnxruntime.so.1.24.1
USER 10001:10001
WORKDIR /var/lib/tunefleet
EXPOSE 8081
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 CMD ["worker", "healthcheck", "http://127.0.0.1:8081/healthz"]
ENTRYPOINT ["worker"]
# The queue is this machine's GPU class (worker info shows it; gpu.h100 for
# an H100); a GPU machine runs one task per GPU, whatever --concurrency says.
CMD ["run", "--health", "0.0.0.0:8081"]
