# The two commands of the quickstart: `make serve` and `make test`. Both bootstrap .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Two installs, each re-run only when pyproject.toml changes: `make serve` installs what
# serving needs (sift and the browser extra); `make test` adds the dev tools. The dev
# install is a superset, so it also marks the serving one done; a serving install never
# marks the dev one, so installing dev later is never skipped.
SERVE_STAMP := $(VENV)/.installed-serve
STAMP       := $(VENV)/.installed

.PHONY: serve test lint typecheck pytest bench bench-data train fmt clean

$(SERVE_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[browser]'
	touch $(SERVE_STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,browser]'
	touch $(SERVE_STAMP) $(STAMP)

# The browser where this machine allows it (tools/browser-setup never fails: without it sift
# serves anyway, the browser marked absent); Playwright's download, if used, is passed on.
serve: $(SERVE_STAMP)
	@exe="$$(tools/browser-setup $(BIN)/python)"; \
	if [ -n "$$exe" ]; then export SIFT_BROWSER_EXECUTABLE="$$exe"; fi; \
	exec $(BIN)/sift serve $(ARGS)

# The linters and mypy run beside the test suite (they take seconds of CPU; the suite mostly
# waits on servers), so `make test` lasts about as long as the suite alone.
test: $(STAMP)
	$(MAKE) --no-print-directory -j3 lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

# Three workers, each test file on one of them (its module-scoped servers start once), the
# longest files first (tests/conftest.py); the suite mostly waits, so a third worker on two
# cores is a third faster (docs/testing.md). PYTEST_WORKERS=0 runs everything in this one
# process.
# Bytecode is cached even where the environment says PYTHONDONTWRITEBYTECODE: without it
# every worker assertion-rewrites ~470 modules (~6 s of CPU each) and every `sift` process
# the tests start compiles sift's sources again.
PYTEST_WORKERS ?= 3
pytest: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

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

# Rebuild the shipped extraction model from the shared sets (deterministic: same bytes twice),
# with the fold models bench/extract.py --only "sift text (cv)" scores pages with.
train: bench
	$(BIN)/python bench/train_extract.py --folds-out bench/.cache/extract-folds.json

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
