# Two commands: `make demo` runs the embedded default; `make test` runs the test suite.
# Both create .venv first when it is missing.
VENV ?= .venv
PYTHON ?= python3
CORES ?= 2
BIN := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)

.PHONY: demo test lint report clean

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/python benchmarks/measure_command.py -- $(BIN)/snakemake --cores $(CORES)
	$(BIN)/snakemake --cores $(CORES) --report results/report.html
	@echo "Tables and plots: results/summary/   Report: results/report.html"
	@echo "MLflow: $(BIN)/mlflow ui --backend-store-uri sqlite:///$(CURDIR)/results/mlflow/mlflow.db"

test: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

clean:
	rm -rf results .snakemake
