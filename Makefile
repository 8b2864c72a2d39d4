PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: dev test test-upgrade test-embedded test-shifted lint bench bench-py313 lock clean openapi screenshots

## The dev venv runs what the layer ships: the lock's pins (hashes and comments stripped) constrain it. It has the
## `tickwork` command too (cli/, a package of its own: docs/jobs-as-code.md).
$(STAMP): pyproject.toml layers/common/requirements.txt cli/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	sed -e 's/ \\$$//' -e '/--hash=/d' -e '/^ *#/d' -e '/^ *$$/d' layers/common/requirements.txt > $(VENV)/layer-pins.txt
	$(PY) -m pip install --quiet -e '.[dev]' -c $(VENV)/layer-pins.txt
	$(PY) -m pip install --quiet -e ./cli -c $(VENV)/layer-pins.txt
	touch $(STAMP)

## aws-sam-cli for the `sam build` tests (tests/packaging), in a venv of its own: it pins its own boto3, cfn-lint
## and aws-sam-translator, which the dev venv must not inherit.
.venv-sam/.installed:
	$(PYTHON) -m venv .venv-sam
	.venv-sam/bin/pip install --quiet 'aws-sam-cli>=1.120'
	touch $@

## checkov, which scans the SAM-transformed template in the suite (tests/unit/test_template_deployable.py), in a venv of
## its own for the same reason: every recent checkov pins boto3 exactly, against the layer's lock that the dev venv follows.
CHECKOV := .venv-checkov/.installed
$(CHECKOV): tests/unit/checkov-requirements.txt
	$(PYTHON) -m venv .venv-checkov
	.venv-checkov/bin/pip install --quiet -r tests/unit/checkov-requirements.txt
	touch $@

## Run Tickwork locally: API on 127.0.0.1:3000, poller ticking every second, executors in a thread pool.
dev: $(STAMP)
	$(PY) -m tickwork_local

## Run the whole test suite (uses DATABASE_URL / REDIS_URL when set, embedded servers otherwise), in TEST_WORKERS
## processes (pytest-xdist): it mostly waits on clocks, servers and browsers. The `realtime` tests run one at a time in
## one of them, and a file's tests share a process when its fixtures outlive a test (tests/parallel.py).
TEST_WORKERS ?= 3
test: $(STAMP) interop-servers $(CHECKOV)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

## The tests of a deploy under load (pytest marker `upgrade`, left out of `make test`): no migration from 0020 on
## blocks writers, and the baseline release (tests/upgrade/baseline.py, its venv cached under ~/.cache/tickwork)
## runs beside this tree and after a rollback onto its schema, every slot delivered once. A few minutes.
test-upgrade: $(STAMP)
	$(PY) -m pytest -m upgrade

## The interop suite's stock servers that are not Python packages (tests/interop): Debian's nginx and Node.js,
## installed when missing (as root, or with sudo -n). Without them those tests fail; TICKWORK_SKIP_INTEROP_TESTS=1
## skips them, and this step.
.PHONY: interop-servers
interop-servers:
	@[ "$${TICKWORK_SKIP_INTEROP_TESTS:-}" = 1 ] && exit 0; missing=""; \
	[ -n "$${TICKWORK_NGINX:-}" ] || command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing=" nginx"; \
	[ -n "$${TICKWORK_NODE:-}" ] || command -v node >/dev/null || missing="$$missing nodejs"; \
	[ -z "$$missing" ] && exit 0; \
	as_root=""; [ "$$(id -u)" -eq 0 ] || as_root="sudo -n"; \
	echo "Installing Debian's$$missing for the interop tests (tests/interop)"; \
	{ $$as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $$as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; } \
	|| echo "Could not install$$missing: the interop tests will fail (TICKWORK_SKIP_INTEROP_TESTS=1 skips them)" >&2

## The integration tests of the stores on embedded PostgreSQL and Redis (DATABASE_URL / REDIS_URL unset).
test-embedded: $(STAMP)
	env -u DATABASE_URL -u REDIS_URL $(PY) -m pytest -q tests/integration/dueindex/test_dueindex.py tests/integration/dispatch/test_poller.py

## The whole suite with the date shifted (FAKETIME, libfaketime's format, default +365d) for the tests and
## the embedded PostgreSQL and Redis alike (a local Redis Cluster and Chromium, which hang under libfaketime,
## keep the real clock). Needs Debian's faketime package and a C compiler; not in CI.
test-shifted: $(STAMP) interop-servers $(CHECKOV)
	tests/shifted/run $(PY) -q

## Regenerate docs/openapi.json from the code (tests/integration/test_api_docs.py fails while it is stale).
openapi: $(STAMP)
	$(PY) -m tickwork.api.spec docs/openapi.json

## The template (cfn-lint), the code (ruff: pyflakes, pycodestyle, bugbear; no formatting), its types (mypy, strict on
## the pure core) and its layer map (import-linter, docs/architecture.md). Configured in pyproject.toml.
lint: $(STAMP)
	$(VENV)/bin/cfn-lint --include-checks I -- template.yaml
	$(VENV)/bin/ruff check --no-fix layers/common/tickwork functions local cli
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

## Every benchmark (docs/benchmarks.md; about 8 minutes, plus at most 10 for the many-tenant and 100,000-run
## instants, each under a time budget: --tenants-budget, --instant-budget; rewrites its results). It builds what they need first: the
## dev venv, and .venv-3.13 (the project on Python 3.13, the Lambda runtime) for the cold-start phase. A phase that
## cannot run is reported skipped and the others' results are still printed and written.
## BENCH_ARGS: more arguments, e.g. `make bench BENCH_ARGS='--quick --only connections'`.
bench: $(STAMP) bench-py313
	$(PY) -m bench $(BENCH_ARGS)

## Python 3.13 where .ci/run finds it: pyenv's versions, then PATH (empty without one; set it to choose another).
PYTHON313 ?= $(shell for c in "$$(pyenv root 2>/dev/null || echo $$HOME/.pyenv)"/versions/3.13*/bin/python3.13 \
	python3.13; do "$$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null && { echo "$$c"; break; }; done)

## .venv-3.13 for the cold-start benchmark, by the $(STAMP) rule (as .ci/run builds it). Without Python 3.13, or when
## the build fails (no network), the benchmarks still run and report the cold start skipped.
bench-py313:
	@py313='$(PYTHON313)'; \
	if [ -z "$$py313" ]; then echo "Python 3.13 not found (pyenv or PATH): the cold-start benchmark will be skipped"; \
	else $(MAKE) --no-print-directory .venv-3.13/.installed VENV=.venv-3.13 PYTHON="$$py313" \
		|| echo "building .venv-3.13 failed: the cold-start benchmark will be skipped"; fi

## Re-resolve the layer's lock file (layers/common/requirements.txt, which `sam build` installs) from
## pyproject's dependencies, for the Lambda runtime: CPython 3.13 on arm64, every file's hash. Pins already
## in the lock are kept; `make lock UPGRADE=--upgrade` moves them all to the newest allowed. Needs PyPI.
lock: $(STAMP)
	$(VENV)/bin/uv pip compile pyproject.toml --python-version 3.13 --python-platform aarch64-manylinux2014 \
		--generate-hashes --custom-compile-command "make lock" $(UPGRADE) -o layers/common/requirements.txt
## The console's screenshots in docs/console/ (local runtime + Debian's Chromium; a minute or so).
screenshots: $(STAMP)
	$(PY) -m tests.integration.console_screenshots

clean:
	rm -rf $(VENV) .venv-* .tickwork .pytest_cache
