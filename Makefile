# Two commands: `make demo` runs the embedded default; `make test` runs every check and test.
# `make test-fast` is the edit loop: lint and the unit tests, without Snakemake runs.
# All of them create .venv first when it is missing.
VENV ?= .venv
PYTHON ?= python3
CORES ?= 2
BIN := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)
# The edit loop: unit tests only, and of those not the slow ones (tests/conftest.py): no
# Snakemake runs, no real data sets, no SLURM cluster, no network trained or exported.
FAST := not workflow and not realdata and not cluster and not slow

.PHONY: demo test test-fast lint rulegraph report clean reference-env

# uv installs the same pins as pip several times faster (it downloads and unpacks in
# parallel); it is given the package indexes and wheel folders pip is configured with, and
# pip itself installs when uv cannot. Bytecode is compiled once here, as pip does: where
# PYTHONDONTWRITEBYTECODE is set, every job would otherwise compile its imports again.
$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip uv
	sources=$$(for url in $$($(BIN)/pip config get global.extra-index-url 2>/dev/null); \
	    do echo --extra-index-url $$url; done; \
	    for folder in $$($(BIN)/pip config get global.find-links 2>/dev/null); \
	    do echo --find-links $$folder; done); \
	$(BIN)/uv pip install --quiet --native-tls --compile-bytecode --python $(BIN)/python \
	    --index-strategy unsafe-best-match $$sources -e ".[dev]" \
	|| $(BIN)/pip install --quiet -e ".[dev]"
	touch $@

# The embedded default runs in its experiment's folder (docs/usage.md, "Experiments apart"),
# which is also where the report's path is read from.
DEMO := results/droc-demo
demo: $(VENV)/.installed
	$(BIN)/python benchmarks/measure_command.py -- $(BIN)/snakemake --cores $(CORES)
	$(BIN)/snakemake --cores $(CORES) --report report.html
	@echo "Summary: $(DEMO)/summary/index.html   Report: $(DEMO)/report.html"
	@echo "MLflow: $(BIN)/mlflow ui --backend-store-uri sqlite:///$(CURDIR)/$(DEMO)/mlflow/mlflow.db"

# Style and structure: ruff (lint and format), snakefmt, the import layering contracts
# (pyproject's [tool.importlinter]) and Snakemake's own linter.
lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check Snakefile workflow/rules/
	$(BIN)/lint-imports
	$(BIN)/snakemake --lint --configfile tests/configs/tiny.yaml

# Two pytest-xdist workers, a test file (the files sharing the tiny run as one) at a time, longest
# first (tests/conftest.py): one worker's waits (SLURM status checks, servers starting) are the
# other's working time. --durations: the 25 slowest tests at the end of the log (CI's too).
TEST_WORKERS ?= 2
test: lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --no-loadscope-reorder --durations=25

test-fast: lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --no-loadscope-reorder -m "$(FAST)" -q

# The authors' released code as an oracle (benchmarks/reference/README.md): TensorFlow CPU with
# tf-keras in an environment of its own, never part of `make test`.
REFERENCE_VENV ?= .venv-reference
reference-env: $(REFERENCE_VENV)/.installed
$(REFERENCE_VENV)/.installed: benchmarks/reference/requirements.txt
	test -x $(REFERENCE_VENV)/bin/python || $(PYTHON) -m venv $(REFERENCE_VENV)
	$(REFERENCE_VENV)/bin/pip install --quiet -r benchmarks/reference/requirements.txt
	touch $@

# The rule graph drawn in README.md (needs Graphviz's `dot`).
rulegraph: $(VENV)/.installed
	$(BIN)/snakemake --rulegraph --configfile config/paper.yaml | dot -Tsvg > docs/rulegraph.svg

clean:
	rm -rf results .snakemake
