PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: dev test test-embedded test-shifted lint bench screenshots clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## Run Tickwork locally: API on 127.0.0.1:3000, poller ticking every second, executors in a thread pool.
dev: $(STAMP)
	$(PY) -m tickwork_local

## Run the whole test suite (uses DATABASE_URL / REDIS_URL when set, embedded servers otherwise).
test: $(STAMP)
	$(PY) -m pytest

## The integration tests of the stores on embedded PostgreSQL and Redis (DATABASE_URL / REDIS_URL unset).
test-embedded: $(STAMP)
	env -u DATABASE_URL -u REDIS_URL $(PY) -m pytest -q tests/integration/test_dueindex.py tests/integration/test_poller.py

## The whole suite with the date shifted (FAKETIME, libfaketime's format, default +365d) for the tests and
## the embedded PostgreSQL and Redis alike. Needs Debian's faketime package and a C compiler; not in CI.
test-shifted: $(STAMP)
	tests/shifted/run $(PY) -q

lint: $(STAMP)
	$(VENV)/bin/cfn-lint --include-checks I -- template.yaml

bench: $(STAMP)
	$(PY) -m bench

## The console's screenshots in docs/console/ (local runtime + Debian's Chromium; a minute or so).
screenshots: $(STAMP)
	$(PY) -m tests.integration.console_screenshots

clean:
	rm -rf $(VENV) .venv-* .tickwork .pytest_cache
