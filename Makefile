# cellfleet: build, generate, test. Every tool is built from a pinned Go module
# (hack/tools, hack/envtest) into ./bin, which is ignored and acts as the cache.
SHELL := /usr/bin/env bash -o pipefail -c
.DEFAULT_GOAL := help

BIN        := $(CURDIR)/bin
GOTOOLS    := cd hack/tools && GOWORK=off go build -o $(BIN)/
CONTROLLER_GEN := $(BIN)/controller-gen
STATICCHECK    := $(BIN)/staticcheck
KUSTOMIZE      := $(BIN)/kustomize
# KUBEBUILDER_ASSETS is computed only by the targets that need it (building the
# apiserver takes minutes cold).
ASSETS = $(shell hack/envtest-assets.sh)
GOTEST_FLAGS ?= -race -count=1
PKGS ?= ./...

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

##@ Build
.PHONY: build
build: ## build the binaries into ./bin
	go build -o $(BIN)/ ./cmd/...

##@ Generation
$(CONTROLLER_GEN): hack/tools/go.mod
	$(GOTOOLS) sigs.k8s.io/controller-tools/cmd/controller-gen
$(STATICCHECK): hack/tools/go.mod
	$(GOTOOLS) honnef.co/go/tools/cmd/staticcheck
$(KUSTOMIZE): hack/tools/go.mod
	$(GOTOOLS) sigs.k8s.io/kustomize/kustomize/v5

.PHONY: generate
generate: $(CONTROLLER_GEN) ## deepcopy functions for the API types
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## CRDs and RBAC from markers
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	hack/rbac-gen.sh $(CONTROLLER_GEN)

.PHONY: manifests-check
manifests-check: generate manifests ## fail when generated files are stale
	@if ! git diff --quiet -- api config || [ -n "$$(git status --porcelain -- api config)" ]; then \
	  git status --short -- api config; git --no-pager diff --stat -- api config; \
	  echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; fi

.PHONY: kustomize-check
kustomize-check: $(KUSTOMIZE) ## every kustomization builds
	@for k in $$(find config -name kustomization.yaml -printf '%h\n' | sort); do \
	  $(KUSTOMIZE) build $$k >/dev/null || { echo "kustomize build $$k failed"; exit 1; }; done

.PHONY: lint
lint: $(STATICCHECK) ## go vet and staticcheck
	go vet ./... ./test/e2e/...
	$(STATICCHECK) ./... ./test/e2e/...

##@ Test
.PHONY: envtest-assets
envtest-assets: ## build kube-apiserver and etcd for envtest (cached in ./bin/k8s)
	hack/envtest-assets.sh

.PHONY: test
test: ## the whole suite: unit, envtest, process and FUSE tests
	KUBEBUILDER_ASSETS=$(ASSETS) go test $(GOTEST_FLAGS) $(PKGS)

.PHONY: test-envtest
test-envtest: ## only the suites that run on the real API server
	KUBEBUILDER_ASSETS=$(ASSETS) go test $(GOTEST_FLAGS) ./api/... ./internal/controller/...

.PHONY: bench
bench: ## benchmarks, written as ratios against a baseline of the same run
	go test -run '^$$' -bench . -benchmem -count=1 -timeout 60m $(PKGS)

.PHONY: check
check: manifests-check lint test ## what CI runs
