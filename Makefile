# The two commands of the quickstart: `make serve` and `make test`. Both bootstrap .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: serve test lint typecheck pytest bench bench-data fmt clean

# Re-install only when pyproject.toml changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,browser]'
	touch $(STAMP)

serve: $(STAMP)
	$(BIN)/sift serve $(ARGS)

test: lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

fmt: $(STAMP)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

# Benchmarks need the baselines in the `bench` extra.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,browser,bench]'

# The benchmarks' public data sets, into bench/.data/ (bench/data.py says where each comes
# from). Offline: make bench-data ARGS="--from DIR".
bench-data: $(STAMP)
	$(BIN)/python bench/data.py $(ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
