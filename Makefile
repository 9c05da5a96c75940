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

.PHONY: setup tools kube test unit integration lint typecheck imports format demo bench bench-full chaos chart dashboard clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

tools: $(TOOLS)/bin/kubectl $(TOOLS)/bin/promql-check

$(TOOLS)/bin/kubectl:
	bash scripts/install-tools.sh $(TOOLS)

# etcd, kube-apiserver and kube-scheduler from tools/etcd and tools/kube (Go); skipped when built.
kube:
	bash scripts/build-kube.sh

# Prometheus's own PromQL parser as a tiny Go tool (tools/promql): tests/chart checks every expression of the
# chart's dashboard and alerting rules with it.
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

unit: setup
	$(PY) -m pytest --ignore=tests/integration

integration: setup tools kube
	$(PY) -m pytest tests/integration

demo: setup
	$(PY) -m sim demo --report demo-report.json

bench: setup
	$(PY) -m bench --quick --report bench-report.json

bench-full: setup
	$(PY) -m bench --nodes 5000 --gpus-per-node 8 --running-pods 20000 --pods 2000 --workers 2 --report bench-report.json

chaos: setup
	$(PY) -m sim chaos --seed 1 --pods 1000 --workers 4 --replicas 2 --fault-rate 0.1 --kill-leader 2 --report chaos-report.json

chart: setup tools
	bash scripts/check-chart.sh $(TOOLS)

# Regenerate the chart's Grafana dashboard from scripts/dashboard.py (tests/chart checks they agree).
dashboard: setup
	$(PY) scripts/dashboard.py

clean:
	rm -rf $(VENV) $(TOOLS) .pytest_cache .mypy_cache .ruff_cache .hypothesis demo-report.json bench-report*.json chaos-report*.json fuzz-report*.json
