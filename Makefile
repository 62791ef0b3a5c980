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
GOTEST_FLAGS ?= -race -count=1 -timeout 30m
PKGS ?= ./... ./test/e2e/cluster/... ./test/e2e/load/...

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

##@ Build
.PHONY: build
build: ## build the binaries into ./bin
	go build -o $(BIN)/ ./cmd/...

##@ Git hooks (docs/development.md, "Commits")
.PHONY: hooks
hooks: ## link hack/commit-msg in as .git/hooks/commit-msg: warns on long or non-imperative commit subjects, never blocks
	@link=.git/hooks/commit-msg; target=../../hack/commit-msg; \
	  [[ -d .git ]] || { echo "hooks: .git is not a directory here (a worktree?): link $$target yourself"; exit 1; }; \
	  if [[ -L $$link && $$(readlink $$link) == "$$target" ]]; then echo "hooks: $$link already links to $$target"; \
	  elif [[ -e $$link || -L $$link ]]; then echo "hooks: $$link exists and is not ours; move it away and rerun"; exit 1; \
	  else mkdir -p .git/hooks && ln -s $$target $$link && echo "hooks: $$link -> $$target"; fi; \
	  hp=$$(git config --get core.hooksPath || true); \
	  [[ -z $$hp ]] || echo "hooks: note: core.hooksPath is $$hp, so git does not run .git/hooks"

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
	@$(MAKE) --no-print-directory chart-sync

.PHONY: manifests-check
manifests-check: generate manifests ## fail when generated files are stale
	@if ! git diff --quiet -- api config charts || [ -n "$$(git status --porcelain -- api config charts)" ]; then \
	  git status --short -- api config charts; git --no-pager diff --stat -- api config charts; \
	  echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; fi

.PHONY: kustomize-check
kustomize-check: $(KUSTOMIZE) ## every kustomization builds; the overlays install the storage half with exactly the role files' RBAC, and each ServiceAccount may do only its half, on a real API server
	@for k in $$(find config -name kustomization.yaml -printf '%h\n' | sort); do \
	  $(KUSTOMIZE) build $$k >/dev/null || { echo "kustomize build $$k failed"; exit 1; }; done
	cd hack/tools && KUBEBUILDER_ASSETS=$(ASSETS) GOWORK=off go test -count=1 -run '^TestKustomize' ./chartcheck/ -args -kustomize=$(KUSTOMIZE) -repo=$(CURDIR)

.PHONY: lint
lint: $(STATICCHECK) ## go vet, staticcheck and the commit-msg hook's self-check
	go vet ./... ./test/e2e/...
	$(STATICCHECK) ./... ./test/e2e/...
	hack/commit-msg-test.sh

##@ Test
.PHONY: envtest-assets
envtest-assets: ## build kube-apiserver and etcd for envtest (cached in ./bin/k8s)
	hack/envtest-assets.sh

.PHONY: test
test: ## the whole suite: unit, envtest, process and FUSE tests
	KUBEBUILDER_ASSETS=$(ASSETS) go test $(GOTEST_FLAGS) $(PKGS)
	@# the buffer-pool tests skip under -race (sync.Pool drops Puts at random there)
	go test -count=1 ./internal/replica/wire/

.PHONY: test-envtest
test-envtest: ## only the suites that run on the real API server
	KUBEBUILDER_ASSETS=$(ASSETS) go test $(GOTEST_FLAGS) ./api/... ./internal/controller/... ./internal/csi/replicated/controller/...

.PHONY: bench
bench: ## benchmarks, written as ratios against a baseline of the same run
	go test -run '^$$' -bench . -benchmem -count=1 -timeout 60m $(PKGS)
	@# the log-store comparison (docs/decisions/0001-log-store.md) is its own
	@# module, so raft-wal never becomes a dependency of cellfleet
	cd test/logstorebench && GOWORK=off go test -run '^$$' -bench . -benchtime 2000x -count=1

.PHONY: check
check: manifests-check lint test ## what CI runs

.PHONY: scale
scale: ## the control plane at scale on envtest: 200 simulated nodes, 1,000 replicated claims in bursts, 100 fleets, then faults; prints the figures of docs/scale.md (SCALE_FLAGS, SCALE_REPORT)
	KUBEBUILDER_ASSETS=$$(hack/envtest-assets.sh cluster) go test -run '^TestControlPlaneAtScale$$' -count=1 -timeout 3h -v ./test/scale/ \
	  -args -scale.big -scale.report=$(or $(SCALE_REPORT),$(CURDIR)/bin/scale-report.md) $(SCALE_FLAGS)

##@ Local cluster and qualification (docs/local-cluster.md, docs/qualification.md)
.PHONY: images
images: ## amd64+arm64 OCI image tarballs of manager, celldsim and pause in bin/images (hack/mkimage, no registry)
	hack/cluster/images.sh

.PHONY: sidecar-images
sidecar-images: ## amd64+arm64 OCI image tarballs of csi-provisioner and csi-resizer built from their pinned modules (cold: ~17 min CPU)
	hack/cluster/images.sh csi-provisioner csi-resizer

.PHONY: images-check
images-check: $(STATICCHECK) ## the image builder: vet, staticcheck, reproducible digests across two builds, config and both platforms in the archive
	cd hack/mkimage && GOWORK=off go vet ./... && GOWORK=off $(STATICCHECK) ./... && GOWORK=off go test -count=1 ./...

.PHONY: cluster-up
cluster-up: images ## a 3-node local cluster from binaries built here (state in .cluster)
	hack/cluster/cluster-up.sh

.PHONY: cluster-down
cluster-down: ## remove the local cluster and everything it left on the host
	hack/cluster/cluster-down.sh

# The local cluster's state directory (hack/cluster/env.sh): cluster-up.sh writes its kubeconfig
# and, in bin.env, the directory of the kubectl built for it.
CLUSTER_DIR ?= $(CURDIR)/.cluster

.PHONY: cluster-manifest
cluster-manifest: $(KUSTOMIZE) ## build config/overlays/local into .cluster/manager.yaml, replaced only by a complete build
	@set -eu; mkdir -p "$(CLUSTER_DIR)"; tmp="$(CLUSTER_DIR)/manager.yaml.tmp"; trap 'rm -f "$$tmp"' EXIT; \
	  $(KUSTOMIZE) build config/overlays/local > "$$tmp"; \
	  [[ -s $$tmp ]] || { echo "cluster-manifest: kustomize built nothing from config/overlays/local"; exit 1; }; \
	  mv "$$tmp" "$(CLUSTER_DIR)/manager.yaml"; echo "cluster-manifest: $(CLUSTER_DIR)/manager.yaml"

.PHONY: cluster-storage
cluster-storage: cluster-manifest ## apply the whole product (config/overlays/local) to the running local cluster with its own kubectl
	@set -eu; [[ -f "$(CLUSTER_DIR)/bin.env" && -f "$(CLUSTER_DIR)/admin.kubeconfig" ]] || \
	  { echo "cluster-storage: no local cluster in $(CLUSTER_DIR): run 'make images && CLUSTER_NODES=4 hack/cluster/cluster-up.sh' first"; exit 1; }; \
	  source "$(CLUSTER_DIR)/bin.env"; \
	  "$$K8S/kubectl" --kubeconfig "$(CLUSTER_DIR)/admin.kubeconfig" apply --server-side -f "$(CLUSTER_DIR)/manager.yaml"

.PHONY: e2e
e2e: ## cluster-up, the qualification suites under write load, cluster-down; writes docs/qualification.md
	hack/cluster/e2e.sh

##@ Demo and FUSE benchmarks (docs/fuse.md, docs/performance.md)
.PHONY: demo
demo: ## 3 replica hosts, a replicated FUSE mount, a workload, the coordinator killed with -9, every byte verified
	@command -v fusermount3 >/dev/null || { echo "installing fuse3 (Debian) for the FUSE mount"; \
	  apt-get -o DPkg::Lock::Timeout=120 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y -qq fuse3 >/dev/null; }
	go build -o $(BIN)/ ./cmd/replica-host ./cmd/csi-node ./hack/demo
	$(BIN)/demo --bin $(BIN) --dir $(CURDIR)/.demo

.PHONY: chaos
chaos: ## the nemesis: 3 replica hosts, a single-writer mount, a workload with a ledger, random faults from a seed, every acknowledged write verified (CHAOS_DURATION, CHAOS_SEED)
	@command -v fusermount3 >/dev/null || { echo "installing fuse3 (Debian) for the FUSE mount"; \
	  apt-get -o DPkg::Lock::Timeout=120 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y -qq fuse3 >/dev/null; }
	go build -o $(BIN)/ ./cmd/replica-host ./cmd/csi-node ./hack/chaos
	$(BIN)/chaos --bin $(BIN) --dir $(CURDIR)/.chaos --duration $(or $(CHAOS_DURATION),5m) $(if $(CHAOS_SEED),--seed $(CHAOS_SEED))

.PHONY: bench-fuse
bench-fuse: ## FUSE mount benchmarks (R=3) against the raw directory and go-fuse's loopback; BENCH_BASE=<commit> adds new/old ratios
	@if [ -n "$(BENCH_BASE)" ]; then hack/bench-fuse-ab.sh; else \
	  go test -run '^$$' -bench . -benchtime 1x -count=1 -timeout 60m ./internal/fuse/; fi

.PHONY: bench-gluster
bench-gluster: ## make bench-fuse with GlusterFS replica 3 on this disk as a further baseline (hack/gluster-bench.sh; root, installs glusterfs-server)
	@set -e; trap 'hack/gluster-bench.sh down' EXIT; eval "$$(hack/gluster-bench.sh up)"; \
	  go test -run '^$$' -bench '$(or $(BENCH),.)' -benchtime $(or $(BENCHTIME),1x) -count=1 -timeout 90m ./internal/fuse/

.PHONY: bench-fio
bench-fio: ## the replica store's sustained workloads with fio on the mount, GlusterFS replica 3 and the raw directory in one run (hack/fiobench; root, installs fio and glusterfs-server; FIO_ARGS)
	@command -v fio >/dev/null || { echo "installing fio (Debian)"; \
	  apt-get -o DPkg::Lock::Timeout=120 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y -qq fio >/dev/null; }
	go build -o $(BIN)/ ./cmd/replica-host ./cmd/csi-node ./hack/fiobench
	@set -e; trap 'hack/gluster-bench.sh down' EXIT; eval "$$(hack/gluster-bench.sh up)"; \
	  $(BIN)/fiobench --bin $(BIN) --dir $(CURDIR)/.fiobench $(FIO_ARGS)

##@ Helm chart (docs/install.md, "Helm")
HELM := $(BIN)/helm
# helm's own release build stamps its version and the Kubernetes version of its
# client-go (the default for `helm template`, else 1.20); do the same here.
HELM_VERSION = $(shell awk '$$1=="helm.sh/helm/v3" {print $$2}' hack/tools/go.mod)
HELM_KUBE_MINOR = $(shell awk '$$1=="k8s.io/client-go" {split($$2, v, "."); print v[2]}' hack/tools/go.mod)
HELM_LDFLAGS = -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
  $(foreach p,pkg/chartutil pkg/lint/rules,-X helm.sh/helm/v3/$(p).k8sVersionMajor=1 -X helm.sh/helm/v3/$(p).k8sVersionMinor=$(HELM_KUBE_MINOR))
$(HELM): hack/tools/go.mod
	$(GOTOOLS) -ldflags '$(HELM_LDFLAGS)' helm.sh/helm/v3/cmd/helm

.PHONY: chart-sync
# CHART_ROLES: config/rbac/<name>/role.yaml (or config/<name>/role.yaml) → files/rbac/<name>-role.yaml.
CHART_ROLES := fleet manager volume csi-controller csi-sidecars node replica-host
chart-sync: ## copy the generated CRDs and the role files into charts/cellfleet (after make manifests)
	rm -f charts/cellfleet/crds/*.yaml charts/cellfleet/files/rbac/*.yaml
	cp config/crd/bases/*.yaml charts/cellfleet/crds/
	for r in $(CHART_ROLES); do src=config/rbac/$$r/role.yaml; [[ -f $$src ]] || src=config/$$r/role.yaml; \
	  cp $$src charts/cellfleet/files/rbac/$$r-role.yaml; done

.PHONY: chart-check
chart-check: $(HELM) $(KUSTOMIZE) ## the chart lints, passes the manager's documented flags, refuses a delay below 1m, carries exactly the generated CRDs and RBAC, installs the storage half, and installs on a real API server
	cd hack/tools && KUBEBUILDER_ASSETS=$(ASSETS) GOWORK=off go test -count=1 ./chartcheck/ -args -helm=$(HELM) -kustomize=$(KUSTOMIZE) -repo=$(CURDIR)
