# syntax=docker/dockerfile:1
# The CPU worker image: `worker` with the ONNX Runtime CPU library, serving
# the cpu queue. Build from the repository root:
#   docker build -f deploy/docker/worker-cpu.Dockerfile -t tunefleet/worker-cpu:dev \
#     --build-arg VERSION=$(git describe --always) --build-arg REVISION=$(git rev-parse HEAD) .
# Base images are pinned by digest (checked by internal/testkit/deploycheck); bump
# the tag and the digest together.
ARG GO_IMAGE=golang:1.26-bookworm@sha256:9fdc884aacc3bec89b20ffc69f4bb369c78210e3e4f600387b5128b12c199f81
ARG NODE_IMAGE=node:22-bookworm@sha256:363e1587494626837fa7f9a23bdb453d13b0ff3c67c705c2805cfc69c2d2fad7
# Debian 13 slim, the 2026-08-24 rebuild (13-slim and 13.6-slim resolve to it).
ARG RUNTIME_IMAGE=debian:trixie-slim@sha256:d7e12182ce18b85b93007c1dedf31f2d29e01ccf3182cc4017c709b6259bc132

# ONNX Runtime through the Makefile's `ort` target: npm pack, sha256 of the
# tarball and of the library checked (ORT_TGZ_SHA256, ORT_SO_SHA256).
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

FROM ${RUNTIME_IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="tunefleet worker (CPU)" \
      org.opencontainers.image.description="Builds, checks and benchmarks ONNX Runtime engines from the tunefleet queue" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/tunefleet/tunefleet" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/tunefleet --create-home tunefleet
COPY --from=ort /src/third_party/onnxruntime/lib/ /opt/onnxruntime/lib/
COPY --from=build /out/worker /usr/local/bin/worker
COPY LICENSE NOTICE /usr/share/doc/tunefleet/
ENV ONNXRUNTIME_SHARED_LIBRARY_PATH=/opt/onnxruntime/lib/libonnxruntime.so.1.24.1
USER 10001:10001
WORKDIR /var/lib/tunefleet
EXPOSE 8081
HEALTHCHECK --interval=30s --timeout=10s --start-period=10s --retries=3 CMD ["worker", "healthcheck", "http://127.0.0.1:8081/healthz"]
ENTRYPOINT ["worker"]
# Redis and the store come from the environment (TUNEFLEET_REDIS,
# TUNEFLEET_STORE and the S3 credentials).
CMD ["run", "--queues", "cpu", "--concurrency", "2", "--health", "0.0.0.0:8081"]
