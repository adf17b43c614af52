# ccsweep: `make help` lists every target. A fresh machine needs only `make demo` or `make test`:
# both install what they use (apt, pip into .venv, cargo, go) and reuse caches outside the clone.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# The pinned releases (KUBERNETES_VERSION, ARGO_WORKFLOWS_VERSION, ...); the scripts read the same file.
include versions.env

CACHE        ?= $(HOME)/.cache/ccsweep
VENV         ?= .venv
PY           := $(VENV)/bin/python
PYTEST       := $(VENV)/bin/pytest
CCSWEEP      := $(VENV)/bin/ccsweep
CARGO_TARGET ?= $(CACHE)/cargo-target
LINK_BIN     := $(CARGO_TARGET)/release/ccsweep-link
DEMO_SPEC    ?= quick
DEMO_STORE   ?= results

export CCSWEEP_CACHE := $(CACHE)
export CCSWEEP_LINK  := $(LINK_BIN)
export CARGO_TARGET_DIR := $(CARGO_TARGET)

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} \
	  /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Main

.PHONY: demo
demo: deps ## Set up, run the quick sweep on this machine and build its figure (a few minutes).
	$(CCSWEEP) run $(DEMO_SPEC) --store $(DEMO_STORE)
	@echo "figure: $(abspath $(DEMO_STORE))/sweeps/$(DEMO_SPEC)/figures/$(DEMO_SPEC).png"
	@echo "report: $(abspath $(DEMO_STORE))/sweeps/$(DEMO_SPEC)/report.html"

.PHONY: test
test: deps tools lint ## Set up, lint, and run every test: unit, emulator, integration, services, end-to-end cluster; the 25 slowest listed.
	cargo test --release --locked --manifest-path emulator/Cargo.toml
	$(PYTEST) -q --durations=25 tests

##@ Setup

.PHONY: deps
deps: apt venv emulator bpf ## Install everything the demo and the tests need (idempotent).

.PHONY: apt
apt: ## Debian packages (iproute2, iperf3, ping, Prometheus, Pushgateway, clang, libbpf, bpftool), only those missing.
	hack/deps.sh

.PHONY: venv
venv: $(VENV)/.installed ## The Python virtualenv with ccsweep (editable) and the dependencies of constraints.txt.
$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[test,lint,data,release]'
	touch $@

# The pinned tools' builds (hack/tools/NAME.sh each), longest first, two at a time: a cold Go build
# leaves a core idle while it fetches modules and links, and the other build fills it. Each line
# of their output names its tool. Their Debian packages come first (apt takes one caller at a time).
TOOL_BUILDS := kubernetes argo minio helm helm-docs mahimahi

.PHONY: tools
tools: ## Pinned tools into ./bin: Kubernetes, Argo, MinIO, Helm (Go module proxy; cold ~11 min on 2 cores), Mahimahi.
	hack/tools/apt.sh
	$(MAKE) --no-print-directory -j2 $(TOOL_BUILDS:%=tool-%)

.PHONY: $(TOOL_BUILDS:%=tool-%)
$(TOOL_BUILDS:%=tool-%): tool-%:
	hack/tools/$*.sh

.PHONY: mahimahi
mahimahi: ## Upstream Mahimahi (pinned commit; setuid mm-delay, mm-loss, mm-link), the second link backend.
	hack/tools/mahimahi.sh

.PHONY: emulator
emulator: ## Build the link emulator (cargo; target dir in the cache, outside the clone).
	cargo build --release --locked --manifest-path emulator/Cargo.toml
	mkdir -p bin && ln -sf $(LINK_BIN) bin/ccsweep-link

# BPF congestion controls (bpf/cc/, GPL-2.0): built from source here with Debian's clang, libbpf
# and bpftool, against this kernel's BTF (vmlinux.h is generated, never committed). The debug
# prefix map keeps the clone's path out of the objects: their digests are part of cell ids.
BPF_SRC      := bpf/cc
BPF_OUT      := bin/bpf
BTF_VMLINUX  := /sys/kernel/btf/vmlinux
BPF_ARCH     := $(subst x86_64,x86,$(subst aarch64,arm64,$(shell uname -m)))
BPF_OBJECTS  := $(patsubst $(BPF_SRC)/%.bpf.c,$(BPF_OUT)/%.bpf.o,$(wildcard $(BPF_SRC)/*.bpf.c))

.PHONY: bpf
ifneq ($(wildcard $(BTF_VMLINUX)),)
bpf: $(BPF_OBJECTS) ## Build the BPF congestion controls of bpf/cc/ into bin/bpf/ (clang, bpftool; needs the kernel's BTF).
else
bpf:
	@echo "bpf: no BTF at $(BTF_VMLINUX): this kernel cannot load BPF congestion controls; not built"
endif

$(BPF_OUT)/vmlinux.h: $(BTF_VMLINUX)
	mkdir -p $(BPF_OUT)
	bpftool btf dump file $< format c > $@.tmp
	mv $@.tmp $@

$(BPF_OUT)/%.bpf.o: $(BPF_SRC)/%.bpf.c $(wildcard $(BPF_SRC)/*.h) $(BPF_OUT)/vmlinux.h
	clang -O2 -g -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -fdebug-prefix-map=$(CURDIR)=. \
	  -I$(BPF_OUT) -c $< -o $@.tmp
	mv $@.tmp $@

##@ Lint

SHELL_SCRIPTS := $(wildcard hack/*.sh hack/*/*.sh images/*.sh)

.PHONY: lint
lint: venv ## ruff, mypy, cargo clippy, shellcheck and helm lint (builds the pinned helm once).
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	cargo clippy --release --locked --all-targets --manifest-path emulator/Cargo.toml -- -D warnings
	$(VENV)/bin/shellcheck --external-sources $(SHELL_SCRIPTS)
	hack/tools/helm.sh
	bin/helm lint --kube-version $(KUBERNETES_VERSION:v%=%) charts/ccsweep

##@ Test

.PHONY: test-unit
test-unit: venv bpf ## Fast tests needing no root, network or cluster (<1 min; builds the BPF objects, part of cell ids): schemas, stores, figures, CLI.
	$(PYTEST) -q tests -m "not (root or tools)"

.PHONY: test-tools
test-tools: venv ## Chart, operator (envtest) and workflow checks with the pinned tools (builds them once).
	$(PYTEST) -q tests -m "tools and not (root or services)"

.PHONY: test-emulator
test-emulator: deps ## The emulator against real TUN devices and the kernel's TCP (root).
	cargo test --release --locked --manifest-path emulator/Cargo.toml
	$(PYTEST) -q tests/emulator

.PHONY: test-integration
test-integration: deps mahimahi ## Real cells: namespaces, emulator or Mahimahi, kernel TCP (root).
	$(PYTEST) -q tests -m integration

.PHONY: test-services
test-services: deps ## Real MinIO, Prometheus and Pushgateway on 127.0.0.1.
	$(PYTEST) -q tests -m services

.PHONY: test-e2e
test-e2e: deps tools ## A real Kubernetes cluster with Argo (one node; a second for test_nodes.py; builds tools into the cache).
	$(PYTEST) -q tests -m e2e

# The flags tests/chart/test_chart.py checks the README with (--dry-run): one place.
HELM_DOCS_FLAGS := --chart-search-root charts --sort-values-order file --skip-version-footer --ignore-non-descriptions

.PHONY: chart-readme
chart-readme: ## Rewrite charts/ccsweep/README.md's values table from values.yaml's `# --` comments (helm-docs).
	hack/tools/helm-docs.sh
	bin/helm-docs $(HELM_DOCS_FLAGS)

.PHONY: link-steps
link-steps: venv ## Rewrite the sweep's per-link Argo steps (ccsweep-sweep.yaml) from the link registry, linkdesc.LINKS.
	$(PY) -m support.link_steps

.PHONY: lint-workflows
lint-workflows: venv ## `argo lint --offline` every workflow, and check them against the CLI they call.
	hack/tools/argo.sh
	$(PYTEST) -q tests/workflows

.PHONY: docs-check
docs-check: venv ## Check the docs' command examples name only commands, options, targets and files that exist.
	$(PYTEST) -q tests/unit/test_docs.py

##@ Cluster

CLUSTER_BASE ?= $(CACHE)/cluster
CLUSTER_NS   ?= ccsweep-k8s

.PHONY: cluster-up
cluster-up: deps tools ## Local Kubernetes (one node; NODES=N for N on this machine) + Argo + MinIO/Prometheus, cell image imported.
	hack/cluster/up.sh $(CLUSTER_BASE) $(CLUSTER_NS)
	hack/cluster/argo.sh $(CLUSTER_BASE) $(CLUSTER_NS)
	hack/cluster/services.sh $(CLUSTER_BASE) $(CLUSTER_NS)
	hack/cluster/image.sh $(CLUSTER_BASE) $(CLUSTER_NS) cell
	@echo "kubectl: $(CLUSTER_BASE)/kubectl   argo: $(CLUSTER_BASE)/argo   services: $(CLUSTER_BASE)/services.env"

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and everything beside it (by recorded PIDs).
	hack/cluster/down.sh $(CLUSTER_BASE) $(CLUSTER_NS)

.PHONY: image
image: ## Build the cell image (images/cell/Dockerfile) with buildah; REGISTRY=host[:port] pushes it, ARCHIVE=file writes an OCI archive.
	images/build.sh $(if $(REGISTRY),--push $(REGISTRY)) $(if $(ARCHIVE),--archive $(ARCHIVE)) $(if $(LOCAL_BASE),--local-base)

.PHONY: image-tag
image-tag: ## Print the tag `make image` gives the cell image here: VERSION-gCOMMIT (-dirty: uncommitted changes).
	@PYTHONPATH=src python3 -m ccsweep.buildinfo

RELEASE_DIR ?= dist

.PHONY: release
release: venv ## From HEAD into RELEASE_DIR (dist/) with SHA256SUMS: wheel, sdist, chart, cell image (OCI archive), its SBOM.
	hack/tools/apt.sh
	hack/tools/helm.sh
	hack/release.sh $(RELEASE_DIR) $(if $(LOCAL_BASE),--local-base)

.PHONY: images
images: tools ## Every image the local cluster runs (cell, argoexec, pause) with buildah, base images made locally.
	images/build.sh --local-base cell
	images/build.sh --local-base argoexec
	images/build.sh --local-base pause

##@ Benchmarks

.PHONY: bench
BENCHES := bench-emulator bench-threshold bench-window bench-density bench-crosscheck bench-timing bench-adaptive \
           bench-cluster bench-full-sweep bench-fanout bench-memory bench-demo bench-idle-wake bench-shared-loop \
           bench-effects-theory
bench: $(BENCHES) ## Every benchmark, one after another (hours; root; benchmarks/README.md lists them).

.PHONY: bench-emulator
bench-emulator: deps mahimahi ## Emulator: max rate on one core, CPU per 100 Mbit/s (and Mahimahi's, same run), lateness p99; beside Mahimahi and Rattan to 1 Gbit/s (builds Rattan once).
	$(PY) -m benchmarks.emulator.bench

.PHONY: bench-threshold
bench-threshold: deps ## Lateness threshold: injected lateness against goodput's run-to-run spread (~30 min, root).
	$(PY) -m benchmarks.lateness.threshold

.PHONY: bench-window
bench-window: deps ## Release window fidelity: Figure 8 grid (0.001-5% loss, 3 reps), 100 us vs each cell's window (~17 min, root).
	$(PY) -m benchmarks.window.fidelity --out benchmarks/results/$$(date -u +%F)-window-fidelity.md

.PHONY: bench-density
bench-density: deps ## The quick preset at the default concurrency and alone (3x): goodput pairs, spread (~15 min, root).
	$(PY) -m benchmarks.density.bench --out benchmarks/results/$$(date -u +%F)-density.md

.PHONY: bench-crosscheck
bench-crosscheck: deps mahimahi ## ccsweep-link against Mahimahi on the same cells (BBR, CUBIC; 0-5% loss, LTE; ~30 min).
	$(PY) -m benchmarks.crosscheck.bench

.PHONY: bench-timing
bench-timing: deps mahimahi ## Mahimahi's timing from outside: validated against ccsweep-link under a real starvation, cost per cell, 10 seeds at default concurrency vs alone (~25 min, root).
	$(PY) -m benchmarks.timing.bench

.PHONY: bench-adaptive
bench-adaptive: deps mahimahi ## Adaptive repetitions vs a fixed 10 runs, Figure 8 path, both links (3 cells, 30 s flows, ~1 h idle; FULL=1 all 26 at 60 s; root).
	$(PY) -m benchmarks.adaptive.bench --store $(or $(STORE),/tmp/ccsweep-adaptive-bench) $(if $(FULL),--full)

.PHONY: bench-cluster
bench-cluster: deps tools ## Argo on the local cluster: per-cell overhead, efficiency, 390-cell projection.
	$(PY) -m benchmarks.cluster.bench

.PHONY: bench-full-sweep
bench-full-sweep: deps tools ## The 390-cell full sweep through Argo on the local cluster, time-scaled (SCALE=, default 0.05; root).
	$(PY) -m benchmarks.cluster.full_sweep $(if $(SCALE),--time-scale $(SCALE)) --out benchmarks/results/$$(date -u +%F)-full-sweep.md

.PHONY: reproduce
reproduce: deps mahimahi ## ReBBR's whole study at full length on ccsweep-link and Mahimahi, beside ReBBR's numbers (hours; root; STORE=, LINKS=).
	$(PY) -m benchmarks.rebbr.reproduce $(if $(STORE),--store $(STORE)) $(if $(LINKS),--links $(LINKS))

.PHONY: bench-fanout
bench-fanout: deps tools ## Real control plane + Argo against 50 and 400 KWOK fake nodes: 390 and 3,900 cells (root).
	hack/tools/kwok.sh
	$(PY) -m benchmarks.fanout.bench --out benchmarks/results/$$(date -u +%F)-fanout.md

.PHONY: bench-idle-wake
bench-idle-wake: deps ## Idle vCPUs polling (a 0 us CPU-latency request, the default) against halting, interleaved, on the demo's cells: lateness and steal (~12 min, root).
	$(PY) -m benchmarks.lateness.idle_wake --pairs 6 --out benchmarks/results/$$(date -u +%F)-idle-wake
	$(PY) -m benchmarks.lateness.idle_wake_report benchmarks/results/$$(date -u +%F)-idle-wake

.PHONY: bench-shared-loop
bench-shared-loop: deps ## N links in one event loop against N ccsweep-link processes, 8 and 16 links, interleaved (3x): CPU per link, lateness (~15 min, root).
	$(PY) -m benchmarks.sharedloop.bench --links 8,16 --reps 3 --out benchmarks/results/$$(date -u +%F)-shared-loop
	$(PY) -m benchmarks.sharedloop.report benchmarks/results/$$(date -u +%F)-shared-loop

.PHONY: bench-effects-theory
bench-effects-theory: deps ## Each link effect end to end against theory (GE loss, jitter, slots, policer, step marker; CUBIC beside Mathis), 3 seeds a row, rewriting the committed result's data and quoted numbers (~8 min, root).
	$(PY) -m benchmarks.effects.theory --reps 3 --out benchmarks/results/2026-11-30-effects-theory
	$(PY) -m benchmarks.effects.theory_report

.PHONY: bench-demo
bench-demo: deps ## The demo as a new user meets it: `ccsweep run quick` from an empty store, 5 times, every attempt and its lateness evidence kept (~12 min, root).
	$(PY) -m benchmarks.lateness.demo_runs --runs 5 --out benchmarks/results/$$(date -u +%F)-demo-cold
	$(PY) -m benchmarks.lateness.demo_report benchmarks/results/$$(date -u +%F)-demo-cold

.PHONY: bench-memory
bench-memory: deps ## Peak memory of plan, a cell's start, plan --chunk, status, figures and the local executor refusing every cell at 400, 4,000 and 40,000 cells, and of plan, plan --chunk, status, figures and the local executor with adaptive repetitions: planned, fake results, no flows (BEFORE=SRC-TREE: that code side by side).
	$(PY) -m benchmarks.memory.bench $(if $(BEFORE),--before $(BEFORE)) --out benchmarks/results/$$(date -u +%F)-memory.md

##@ Clean

.PHONY: clean
clean: ## Remove local build outputs (not the caches in ~/.cache/ccsweep, nor results/).
	rm -rf bin $(VENV) .pytest_cache
