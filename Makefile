PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: dev test lint bench clean

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

lint: $(STAMP)
	$(VENV)/bin/cfn-lint template.yaml

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) .tickwork .pytest_cache
