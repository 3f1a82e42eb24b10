# syntax=docker/dockerfile:1
# The producer image: `producer` with the ONNX Runtime library (to check
# ort: candidates and record bundles) and the demo bundle of `make demo`.
# Build from the repository root:
#   docker build -f deploy/docker/producer.Dockerfile -t tunefleet/producer:dev \
#     --build-arg VERSION=$(git describe --always) --build-arg REVISION=$(git rev-parse HEAD) .
# Base images are pinned by digest (checked by internal/testkit/deploycheck); bump
# the tag and the digest together.
ARG GO_IMAGE=golang:1.26-bookworm@sha256:9fdc884aacc3bec89b20ffc69f4bb369c78210e3e4f600387b5128b12c199f81
ARG NODE_IMAGE=node:22-bookworm@sha256:363e1587494626837fa7f9a23bdb453d13b0ff3c67c705c2805cfc69c2d2fad7
# Debian 13 slim, the 2026-08-24 rebuild (13-slim and 13.6-slim resolve to it).
ARG RUNTIME_IMAGE=debian:trixie-slim@sha256:d7e12182ce18b85b93007c1dedf31f2d29e01ccf3182cc4017c709b6259bc132

# ONNX Runtime, fetched exactly as on a developer machine: the Makefile's
# `ort` target packs onnxruntime-node with npm and checks the tarball's and
# the library's sha256 (ORT_TGZ_SHA256, ORT_SO_SHA256) before installing it.
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
COPY --from=ort /src/third_party/onnxruntime third_party/onnxruntime
# The binaries (cgo: ONNX Runtime is loaded with dlopen), then the demo
# bundle, recorded with the library just fetched: the same recipe as make demo.
RUN make build demo-bundle DEMO_WORK=/tmp/demo DEMO_BUNDLE=/out/demo/bundle

FROM ${RUNTIME_IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="tunefleet producer" \
      org.opencontainers.image.description="Records bundles and submits them to the tunefleet queue; runs the nightly" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/tunefleet/tunefleet" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/tunefleet --create-home tunefleet
COPY --from=ort /src/third_party/onnxruntime/lib/ /opt/onnxruntime/lib/
COPY --from=build /src/bin/producer /usr/local/bin/producer
COPY --from=build /out/demo/ /usr/share/tunefleet/demo/
COPY LICENSE NOTICE /usr/share/doc/tunefleet/
ENV ONNXRUNTIME_SHARED_LIBRARY_PATH=/opt/onnxruntime/lib/libonnxruntime.so.1.24.1
USER 10001:10001
WORKDIR /var/lib/tunefleet
EXPOSE 8080
# The web UI's /healthz (`producer serve`); one-shot commands (submit,
# nightly without --schedule) run with the healthcheck disabled.
HEALTHCHECK --interval=30s --timeout=10s --start-period=10s --retries=3 CMD ["producer", "healthcheck", "http://127.0.0.1:8080/healthz"]
ENTRYPOINT ["producer"]
# The web UI; off loopback it refuses to start without $TUNEFLEET_WEB_TOKEN
# (or TUNEFLEET_WEB_USER and TUNEFLEET_WEB_PASSWORD).
CMD ["serve", "--listen", "0.0.0.0:8080"]
