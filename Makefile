# The two commands of the quickstart: `make serve` and `make test`. Both bootstrap .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: serve test lint typecheck pytest bench fmt clean

# Re-install only when pyproject.toml changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,browser]'
	touch $(STAMP)

serve: $(STAMP)
	$(BIN)/sift serve $(ARGS)

# The linters and mypy run beside the test suite (they take seconds of CPU; the suite mostly
# waits on servers), so `make test` lasts about as long as the suite alone.
test: $(STAMP)
	$(MAKE) --no-print-directory -j3 lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

# Two workers, each test file on one of them (its module-scoped servers start once); see
# docs/testing.md. PYTEST_WORKERS=0 runs everything in this one process.
PYTEST_WORKERS ?= 2
pytest: $(STAMP)
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

fmt: $(STAMP)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

# Benchmarks need the baselines in the `bench` extra.
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,browser,bench]'

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
