# gpuatlas: two commands do everything on a fresh machine.
#   make run    set up (.venv, install, migrate, reference data, fixture snapshot) and serve on 127.0.0.1:8000
#   make test   same set-up, then the whole suite (SQLite always; PostgreSQL when reachable, required under CI=true)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
export GPUATLAS_DATABASE_URL ?= sqlite:///./gpuatlas.db
PYTEST_ARGS ?=
# test processes (pytest-xdist): 4 on this 2-core machine, because many tests wait on a
# subprocess, a server or a lease (measured 2026-12-04: 620 s with 3 against 794 s with 2;
# a fresh clone under CI=true, 679 s with 4 and work stealing against 713 s with 3), work
# stolen so the few minute-long tests do not end the run alone; 0 runs the suite in this
# process. Each worker keeps up to three PostgreSQL databases and one SQLite template
# with the reference data; setups since cost ~370 of ~4,000 worker-seconds, against
# 1,220 (docs/benchmarks.md, "The test suite"); the worker count was not re-measured
PYTEST_WORKERS ?= 4

CHROMIUM ?= /usr/bin/chromium
# axe-core, the accessibility engine the browser tests inject into each page (npm, pinned)
AXE_VERSION := 4.10.2
AXE := .npm-tools/node_modules/axe-core/axe.min.js

.PHONY: run test setup install lint format typecheck bench chaos clean chromium axe

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

setup: $(STAMP)
	@# bytecode written once, whatever PYTHONDONTWRITEBYTECODE says: each command starts
	@# without compiling the project's modules again (0.08 s of an unchanged re-ingest)
	@$(BIN)/python -m compileall -q service crawlers schema migrations > /dev/null
	$(BIN)/gpuatlas db upgrade
	$(BIN)/gpuatlas reference load
	$(BIN)/gpuatlas seed

run: setup
	$(BIN)/gpuatlas serve --host 127.0.0.1 --port 8000

# Browser tests drive Debian's Chromium headless; install it when missing and we may (root).
chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing chromium for the browser tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium missing and not installable here: browser tests will skip (they fail under CI=true)"; fi; \
	fi

# The browser tests' accessibility checks: axe-core from the npm registry into .npm-tools/
# (git-ignored); the version is pinned here and checked, so a bump reinstalls.
axe:
	@if [ "$$(node -p "require('./$(dir $(AXE))package.json').version" 2>/dev/null)" != "$(AXE_VERSION)" ]; then \
	  if command -v npm >/dev/null; then \
	    echo "installing axe-core $(AXE_VERSION) for the browser tests"; \
	    npm install --silent --no-audit --no-fund --no-save --prefix .npm-tools axe-core@$(AXE_VERSION); \
	  else echo "npm missing: the accessibility checks will skip (they fail under CI=true)"; fi; \
	fi

test: setup chromium axe
	@pg_url="$$(bash .ci/postgres-url)" || exit 1; \
	if [ -n "$$pg_url" ]; then echo "PostgreSQL tests on $$pg_url"; else echo "PostgreSQL not reachable: its tests are skipped"; fi; \
	GPUATLAS_TEST_POSTGRES_URL="$$pg_url" $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist worksteal --durations=25 $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

typecheck: $(STAMP)
	$(BIN)/mypy

BENCH_STAMP := $(VENV)/.bench-stamp

# Benchmark-only dependencies (the `bench` extra: gpuhunt, the peer of the query benchmark).
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	@touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	@pg_url="$$(bash .ci/postgres-url)" || exit 1; \
	GPUATLAS_TEST_POSTGRES_URL="$$pg_url" $(BIN)/python -m tests.bench

# Not part of `make test` (a 22-second version of it is): the bounded chaos run of
# docs/reliability.md (3 random kills, 2 aimed at ingests), SQLite then PostgreSQL with two replicas.
chaos: setup
	$(BIN)/python -m tests.chaos.run --seconds 300 --seed 1 --db sqlite
	@pg_url="$$(bash .ci/postgres-url)" || exit 1; \
	if [ -n "$$pg_url" ]; then GPUATLAS_TEST_POSTGRES_URL="$$pg_url" $(BIN)/python -m tests.chaos.run --seconds 300 --seed 1 --db postgres; \
	else echo "PostgreSQL not reachable: the PostgreSQL chaos pass is skipped"; fi

clean:
	rm -rf $(VENV) gpuatlas.db gpuatlas.db-wal gpuatlas.db-shm .pytest_cache .mypy_cache .ruff_cache .npm-tools
