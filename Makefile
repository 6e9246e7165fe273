# Two commands on a fresh machine: `make up` (the main job on the dev stack) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STACKS := dev prod-4p4d agg
VALIDATE := ../shared/tools/validate-manifests

.PHONY: venv test unit golden render plan validate clean docs bench

venv: $(VENV)/.installed
$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

# Unit tests, golden renders, policy tests (and the end-to-end tests when the toolchain is there).
test: venv
	$(PY) -m pytest

unit: venv
	$(PY) -m pytest -m "not e2e"

# Re-render the golden files of every stack (review the diff, then commit it).
golden: venv
	for s in $(STACKS); do $(PY) -m stacks render $$s --out tests/golden/$$s || exit 1; done

render: venv
	$(PY) -m stacks render dev --out build/dev

plan: venv
	for s in $(STACKS); do $(PY) -m stacks plan $$s || exit 1; echo; done

validate: golden
	$(PY) $(VALIDATE) tests/golden

clean:
	rm -rf build .pytest_cache

# Regenerate the configuration reference table in README.md from stacks/config.py.
docs: venv
	$(PY) -m stacks.reference

# Cost of render and check as stacks grow (prod-4p4d, 16, 64, 256 pools); prints a table.
bench: venv
	$(PY) benchmarks/bench.py
