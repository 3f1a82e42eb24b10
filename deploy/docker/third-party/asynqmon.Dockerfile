# syntax=docker/dockerfile:1
# asynqmon (asynq's queue dashboard) for docker-compose.yml, built from its Go
# module: the module proxy and sum.golang.org verify the source, its UI is
# embedded in the module, and the bases are the pinned ones our images use. No
# registry publishes a digest-pinned asynqmon image we could check, and a tag
# alone can be moved under us. Not one of our images: deploycheck checks its
# bases' pins, not its command.
ARG GO_IMAGE=golang:1.26-bookworm@sha256:9fdc884aacc3bec89b20ffc69f4bb369c78210e3e4f600387b5128b12c199f81
ARG RUNTIME_IMAGE=debian:trixie-slim@sha256:d7e12182ce18b85b93007c1dedf31f2d29e01ccf3182cc4017c709b6259bc132

FROM ${GO_IMAGE} AS build
ENV CGO_ENABLED=0 GOBIN=/out
RUN go install github.com/hibiken/asynqmon/cmd/asynqmon@v0.7.2

FROM ${RUNTIME_IMAGE}
COPY --from=build /out/asynqmon /usr/local/bin/asynqmon
USER 65532:65532
EXPOSE 8080
# Read-only: the dashboard shows queues and tasks; it cannot delete, run or
# archive them (mutating API calls answer 405).
ENTRYPOINT ["asynqmon", "--read-only"]
