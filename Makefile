# Two commands on a fresh machine: `make up` (prod-4p4d on the local cluster) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STACKS := dev prod-4p4d agg pd-router07 prod-autoscale

.PHONY: venv toolchain consumers up up-render serve lint test unit e2e golden render plan validate clean docs bench \
	cluster down test-property-long mutate consumer-facts consumers-vllm

venv: $(VENV)/.installed
$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

# The Pulumi CLI, Python language host and Kubernetes provider (cached outside the project).
toolchain:
	scripts/install-pulumi >/dev/null

# The router's real programs (llm-d EPP and P/D sidecar v0.7.1, from the Go module proxy) that tests/consumers and the
# local site run, the engine simulator and the site's gateway role (cached outside the project;
# docs/consumers-router.md).
consumers:
	scripts/consumers build >/dev/null

# A local Kubernetes control plane set up as a simulated Rebel100 site (see docs/local-cluster.md):
# `make cluster` builds it once (12-15 min cold, cached outside the project) and starts it; `make down` stops it.
cluster:
	scripts/cluster build >/dev/null
	$(if $(PORT),REBEL100_CLUSTER_PORT=$(PORT) )scripts/cluster start

down:
	$(PYTHON) -m localsite stop --dir .cluster/serve/site
	REBEL100_CLUSTER_DIR=.cluster/serve/cluster scripts/cluster stop
	scripts/cluster stop

# The main job: `pulumi up` of prod-4p4d with the policy pack on the local cluster (started if it is
# not running), then the stack outputs and where each engine pod and its devices landed. The cluster's base port is
# the one it used last, else the first free block from 16443 up (a second checkout's beside the first); PORT=N asks
# for N.
up: venv toolchain
	$(if $(PORT),REBEL100_CLUSTER_PORT=$(PORT) )scripts/up prod-4p4d --local-cluster

# Serve a stack's OpenAI API on 127.0.0.1 through the real router programs and simulated engines, on a local site
# of its own (docs/serving-locally.md): prints the base URL, runs until Ctrl-C. STACK= picks another stack.
serve: venv toolchain consumers
	scripts/serve $(STACK)

# Without a cluster: the dev stack rendered to build/dev by the Kubernetes provider.
up-render: venv toolchain
	scripts/up dev

# The code checks, offline and in seconds (docs/testing.md): ruff's linter and its formatter (nothing to reformat),
# mypy (strict on core/ and objects/; pyproject.toml holds the settings of both) and ShellCheck on every shell script.
SHELL_SCRIPTS := $(shell grep -lsE '^(\#!/usr/bin/env bash|\# shellcheck shell=bash)' .ci/* scripts/*)
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/shellcheck -x $(SHELL_SCRIPTS)

# The code checks, then unit, golden, policy and end-to-end tests. The e2e tests need the toolchain: `make test`
# tries to install it and runs them when that worked (they skip otherwise; .ci/run makes that a failure).
# TEST_WORKERS pytest processes (pytest-xdist), each given whole modules: the modules that deploy spend most of their
# time waiting for the cluster and the site, so two of them share 2 CPUs well (docs/figures.md); 0 runs them in one.
TEST_WORKERS ?= 2
IN_WORKERS = -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
test: venv lint
	-@scripts/install-pulumi >/dev/null || echo "make test: no Pulumi toolchain, the e2e tests will skip" >&2
	$(PY) -m pytest $(IN_WORKERS)

e2e: venv toolchain
	$(PY) -m pytest -m e2e

# The gate-subset property on many more generated configs (`make test` runs 12); see docs/formats.md.
PROPERTY_EXAMPLES ?= 200
test-property-long: venv cluster
	REBEL100_PROPERTY_RANDOM=1 REBEL100_PROPERTY_EXAMPLES=$(PROPERTY_EXAMPLES) $(PY) -m pytest tests/cluster/test_gate_subset.py tests/cluster/test_formats_agree.py -s

unit: venv
	$(PY) -m pytest $(IN_WORKERS) -m "not e2e and not cluster"

# The engine side's facts as data (core/versions/data), dumped by the programs themselves: lmcache's config keys and
# every option of `vllm serve` (docs/consumers-engine.md). Review the diff, then commit it.
consumer-facts: venv
	d=$$(scripts/consumers-engine) && PYTHONPATH=$$d/lmcache $(PY) scripts/consumer_facts.py lmcache > core/versions/data/lmcache-0.5.6.json
	d=$$(scripts/consumers-engine vllm) && VLLM_TARGET_DEVICE=cpu $$d/venv/bin/python scripts/consumer_facts.py vllm-serve > core/versions/data/vllm-0.30.0-serve.json

# vLLM 0.30.0's own parser over every stack's rendered args, and the committed flag data against it (installs upstream
# vLLM with its torch into ~/.cache/rebel100-stack first: several GB, minutes; see docs/consumers-engine.md).
consumers-vllm: venv
	scripts/consumers-engine vllm >/dev/null
	REBEL100_REQUIRE_E2E=1 $(PY) -m pytest tests/consumers/test_vllm_parser.py

# Mutation testing (docs/testing.md): SCOPE=ci mutates core/rules.py, core/sizing.py, the pack's parallelism and
# memory policies and the pools' and RDS tier's objects against their unit tests (what .ci/run runs, a few minutes); SCOPE=core adds the gate, derive, serving, placement and weights; SCOPE=policy
# mutates the policy functions against the pack's tests; SCOPE=objects the objects against tests/objects (all three
# long). Fails when the score is below the scope's floor (tests/mutation/<scope>.cfg). --fresh: no result of an
# earlier run is reused (scripts/mutate without it re-tests only what changed).
SCOPE ?= ci
mutate: $(VENV)/.mutate-installed
	$(PY) scripts/mutate $(SCOPE) --fresh

$(VENV)/.mutate-installed: $(VENV)/.installed requirements-mutate.txt
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-mutate.txt
	touch $@

# Re-render the golden files of every stack (review the diff, then commit it).
golden: venv
	for s in $(STACKS); do $(PY) -m stacks render $$s --out tests/golden/$$s || exit 1; done

render: venv
	$(PY) -m stacks render dev --out build/dev

plan: venv
	for s in $(STACKS); do $(PY) -m stacks plan $$s || exit 1; echo; done

# The strict validator (stacks/validate.py: Kubernetes schemas, the CRDs in crds/) over every golden render, as
# committed: it never re-renders them first (that would validate the code's output, not the reviewed files).
validate: venv
	$(PY) -m stacks validate --quiet tests/golden

# Deletes the renders; the state stays. The next `scripts/up dev` sees that build/dev is not what its
# last up left and writes every file again (scripts/render-state).
clean:
	rm -rf build .pytest_cache

# Regenerate the configuration reference table in docs/configuration.md from core/config.py, and the policies'
# enforcement levels in docs/policies.md from policy/catalog.py and policy/config/.
docs: venv
	$(PY) -m stacks.reference
	$(PY) -m stacks.policy_reference

# Where the time goes: check against its import floor and, with the toolchain and the control plane, the PR
# check and a no-op up on a local cluster of its own, each part apart (docs/performance.md). ARGS are the script's:
# `make bench ARGS=--scale` adds stacks of 16 to 1024 pools (20-25 min more here);
# `ARGS="--sections scale --sizes 16 64"`; `ARGS="--sections agentic"` routes coding-agent sessions each way (~4 min).
bench: venv
	$(PY) benchmarks/bench.py $(ARGS)
