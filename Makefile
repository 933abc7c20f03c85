# trio-mcp developer entry points. Every target that needs the environment builds it first,
# so each works on a fresh clone. The project is installed strict-editable every time
# (a new module is never missed, and mypy sees the real package layout).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check

.PHONY: setup demo test lint typecheck pytest fmt clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# The npm reference servers of the interop tests (tests/interop/package-lock.json), installed
# with `npm ci` when npm is there and the lockfile changed since the last install (npm writes
# node_modules/.package-lock.json, the stamp). Without npm those interop tests skip.
INTEROP_DIR   := tests/interop
INTEROP_STAMP := $(INTEROP_DIR)/node_modules/.package-lock.json
HAVE_NPM      := $(shell command -v npm 2>/dev/null)

setup: $(PY) $(if $(HAVE_NPM),$(INTEROP_STAMP))
	$(PIP) install --quiet -e '.[test]' --config-settings editable_mode=strict
	$(if $(HAVE_NPM),,@echo "npm not found: the npm interop tests (tests/interop) will be skipped")

$(INTEROP_STAMP): $(INTEROP_DIR)/package-lock.json $(INTEROP_DIR)/package.json
	cd $(INTEROP_DIR) && npm ci --no-audit --no-fund
	touch $@

demo: setup
	$(VENV)/bin/trio-mcp demo

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

MYPY := $(VENV)/bin/mypy -p trio_mcp.protocol -p trio_mcp.transports -p trio_mcp.actors \
	&& $(VENV)/bin/mypy

typecheck: setup
	$(MYPY)

pytest: setup
	$(VENV)/bin/pytest $(PYTEST_ARGS)

test: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(MYPY)
	$(VENV)/bin/pytest $(PYTEST_ARGS)

fmt: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache .hypothesis \
		$(INTEROP_DIR)/node_modules
