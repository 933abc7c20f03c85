# trio-mcp developer entry points. Every target that needs the environment builds it first,
# so each works on a fresh clone. The project is installed strict-editable every time
# (a new module is never missed, and mypy sees the real package layout).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check

.PHONY: setup setup-python demo test lint typecheck pytest fmt clean conformance

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# The npm reference servers of the interop tests (tests/interop/package-lock.json), installed
# with `npm ci` when npm is there and the lockfile changed since the last install (npm writes
# node_modules/.package-lock.json, the stamp). Without npm those interop tests skip.
INTEROP_DIR   := tests/interop
INTEROP_STAMP := $(INTEROP_DIR)/node_modules/.package-lock.json
HAVE_NPM      := $(shell command -v npm 2>/dev/null)

# What the tests need: the project with its test extra, and the npm interop servers.
setup: $(PY) $(if $(HAVE_NPM),$(INTEROP_STAMP))
	$(PIP) install --quiet -e '.[test]' --config-settings editable_mode=strict
	$(if $(HAVE_NPM),,@echo "npm not found: the npm interop tests (tests/interop) will be skipped")

# What the demo needs: the project alone (its demo servers are its own fake server, in Python).
setup-python: $(PY)
	$(PIP) install --quiet -e . --config-settings editable_mode=strict

$(INTEROP_STAMP): $(INTEROP_DIR)/package-lock.json $(INTEROP_DIR)/package.json
	cd $(INTEROP_DIR) && npm ci --no-audit --no-fund
	touch $@

demo: setup-python
	$(VENV)/bin/trio-mcp demo

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# -p trio_mcp: the package with the public face (trio_mcp/__init__.py) and every layer under it.
MYPY := $(VENV)/bin/mypy -p trio_mcp && $(VENV)/bin/mypy

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

# The official MCP conformance suite, client side: the 2025-11-25 required scenarios and the
# JSON Schema one, then the 2026-07-28 ones trio-mcp speaks (CONFORMANCE_MODERN, run with
# --spec-version 2026-07-28), ONE AT A TIME (run together they compete for the CPU and
# sse-retry's timing checks get flaky), each against tests/conformance/client.py. The runner
# installs Node 22 and the suite into a cache folder on first use (about 30 s). A scenario not in
# the baseline fails the target when a check fails or warns or the client exits with an error.
# The OAuth scenarios (the 14 required ones at 2025-11-25 and at 2026-07-28, the 11 draft ones,
# the two 2025-03-26 back-compatibility ones, and the client credentials and DPoP extensions) must
# pass; the two extensions trio-mcp does not implement (enterprise-managed authorization,
# workload identity federation) are expected to fail (tests/conformance/expected-failures.yaml),
# and one of them that passes fails the target too (a stale entry), so the baseline stays exact.
CONFORMANCE           := ../shared/tools/conformance
CONFORMANCE_CLIENT    := $(PY) tests/conformance/client.py
CONFORMANCE_BASELINE  := tests/conformance/expected-failures.yaml
CONFORMANCE_SCENARIOS := initialize tools_call elicitation-sep1034-client-defaults sse-retry \
	json-schema-2020-12-preservation
CONFORMANCE_MODERN    := tools_call request-metadata sep-2322-client-request-state \
	http-standard-headers http-custom-headers http-invalid-tool-headers json-schema-ref-no-deref \
	json-schema-2020-12-preservation
CONFORMANCE_OAUTH     := auth/metadata-default auth/metadata-var1 auth/metadata-var2 \
	auth/metadata-var3 auth/basic-cimd auth/scope-from-www-authenticate \
	auth/scope-from-scopes-supported auth/scope-omitted-when-undefined auth/scope-step-up \
	auth/scope-retry-limit auth/token-endpoint-auth-basic auth/token-endpoint-auth-post \
	auth/token-endpoint-auth-none auth/pre-registration
# The 11 draft ones of the 2026-07-28 set, the two 2025-03-26 back-compatibility ones, and the
# unscored extensions trio-mcp implements (CONFORMANCE_EXTENSIONS) or not (..._EXPECTED).
CONFORMANCE_OAUTH_DRAFT := auth/resource-mismatch auth/offline-access-scope \
	auth/offline-access-not-supported auth/authorization-server-migration auth/iss-supported \
	auth/iss-not-advertised auth/iss-supported-missing auth/iss-wrong-issuer auth/iss-unexpected \
	auth/iss-normalized auth/metadata-issuer-mismatch
CONFORMANCE_OAUTH_2025_03 := auth/2025-03-26-oauth-metadata-backcompat \
	auth/2025-03-26-oauth-endpoint-fallback
CONFORMANCE_EXTENSIONS := auth/client-credentials-jwt auth/client-credentials-basic auth/dpop \
	auth/dpop-nonce
CONFORMANCE_EXTENSIONS_EXPECTED := auth/enterprise-managed-authorization auth/wif-jwt-bearer

# run SCENARIO VERSION MUST_PASS: one scenario alone (VERSION empty: the suite's choice); a
# scenario that must pass fails the target unless it passed, any other unless the runner found
# every failure expected (and no stale baseline entry).
CONFORMANCE_RUN = run() { \
		echo "=== conformance: $$1$${2:+ at $$2}"; \
		out=$$($(CONFORMANCE) client --command "$(CONFORMANCE_CLIENT)" --scenario "$$1" \
			$${2:+--spec-version $$2} --expected-failures $(CONFORMANCE_BASELINE) 2>&1); rc=$$?; \
		printf '%s\n' "$$out"; \
		if [ "$$3" = yes ]; then printf '%s\n' "$$out" | grep -q "OVERALL: PASSED" || rc=1; fi; \
		[ $$rc -eq 0 ] || failed="$$failed $$1$${2:+@$$2}"; \
	}

conformance: setup
	@failed=""; $(CONFORMANCE_RUN); \
	for scenario in $(CONFORMANCE_SCENARIOS); do run "$$scenario" "" yes; done; \
	for scenario in $(CONFORMANCE_MODERN); do run "$$scenario" 2026-07-28 yes; done; \
	for scenario in $(CONFORMANCE_OAUTH); do run "$$scenario" "" yes; done; \
	for scenario in $(CONFORMANCE_OAUTH) $(CONFORMANCE_OAUTH_DRAFT); do \
		run "$$scenario" 2026-07-28 yes; done; \
	for scenario in $(CONFORMANCE_OAUTH_2025_03); do run "$$scenario" 2025-03-26 yes; done; \
	for scenario in $(CONFORMANCE_EXTENSIONS); do run "$$scenario" "" yes; done; \
	for scenario in $(CONFORMANCE_EXTENSIONS_EXPECTED); do run "$$scenario" "" no; done; \
	if [ -n "$$failed" ]; then echo "conformance: FAILED:$$failed"; exit 1; fi; \
	echo "conformance: all $(words $(CONFORMANCE_SCENARIOS)) scenarios passed, and" \
		"$(words $(CONFORMANCE_MODERN)) at 2026-07-28; OAuth: $(words $(CONFORMANCE_OAUTH)) at" \
		"2025-11-25, $(words $(CONFORMANCE_OAUTH) $(CONFORMANCE_OAUTH_DRAFT)) at 2026-07-28," \
		"$(words $(CONFORMANCE_OAUTH_2025_03)) at 2025-03-26, $(words $(CONFORMANCE_EXTENSIONS))" \
		"extensions; $(words $(CONFORMANCE_EXTENSIONS_EXPECTED)) extensions failed as expected"

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache .hypothesis \
		$(INTEROP_DIR)/node_modules

# Benchmarks (never part of `make test`): trio-mcp, the official SDK client and a raw trio client
# side by side against the same null servers; one table with ratios. About 3 minutes.
# `make bench BENCH_ARGS="--quick"` for a smoke run; bench/README.md says what each row means.
.PHONY: bench
bench: setup
	$(PY) -m bench $(BENCH_ARGS)
