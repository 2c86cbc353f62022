# pytorchjob-mnist: a PyTorch DDP job from a laptop to a Kubeflow training-operator cluster.
# `make help` lists the targets.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
TOOLS_BIN ?= $(CURDIR)/.tools/bin
export TOOLS_BIN
PY := $(VENV)/bin/python
# torch/torchvision pins for the dev venv only; pyproject keeps ranges so images can choose.
TORCH_PIN ?= torch==2.14.1 torchvision==0.29.1

##@ Everyday

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"} /^##@/ {printf "\n%s\n", substr($$0, 5)} /^[a-zA-Z_-]+:.*##/ {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH_PIN)
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

.PHONY: venv
venv: $(VENV)/.installed ## Create the virtualenv with the trainer and its test tools

.PHONY: tools
tools: ## Install pinned Helm 3, Helm 4 and kubectl into .tools/bin
	bash ci/install-tools.sh

.PHONY: test
test: venv tools ## Run every test that can run on this machine
	$(PY) -m pytest
