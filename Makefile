# WePush Next — developer entry points. `make run` and `make test` do all the set-up they need.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TS_TOOLS := .cache/ts-tools
TYPESCRIPT_VERSION := 5.9.3
DEV_HOME := .wepush-dev
PY_SOURCES := agent server sdk cli tests bench scripts migrations

.PHONY: install generate check-generated lint typecheck imports ts-check test test-only fuzz run bench-engine bench-import bench-e2e clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade "pip==25.3"
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

generate: install
	$(PY) scripts/generate.py

check-generated: install
	$(PY) scripts/check_generated.py

lint: install
	$(BIN)/ruff check $(PY_SOURCES)
	$(BIN)/ruff format --check $(PY_SOURCES)

typecheck: install
	$(BIN)/mypy agent server sdk cli tests

imports: install
	$(BIN)/lint-imports

$(TS_TOOLS)/node_modules/.bin/tsc:
	npm install --silent --no-audit --no-fund --prefix $(TS_TOOLS) typescript@$(TYPESCRIPT_VERSION)

ts-check: $(TS_TOOLS)/node_modules/.bin/tsc
	$(TS_TOOLS)/node_modules/.bin/tsc -p generated/ts-client --noEmit

test-only: install
	$(BIN)/pytest

test: install lint typecheck imports check-generated ts-check test-only

# The contract fuzzing of `make test`, eight times deeper (about 4 minutes on each database).
fuzz: install
	FUZZ_MAX_EXAMPLES=200 $(BIN)/pytest tests/fuzz

run: install
	# The Service creates its data and configuration directories itself, private to this user (0700).
	WEPUSH_CONFIG_DIR=$(CURDIR)/$(DEV_HOME)/config $(BIN)/wepush serve --data-dir $(CURDIR)/$(DEV_HOME)/data

bench-engine: install
	$(PY) -m bench.engine

bench-import: install
	$(PY) -m bench.import_csv

bench-e2e: install
	$(PY) -m bench.e2e

clean:
	rm -rf $(VENV) .cache .mypy_cache .ruff_cache .pytest_cache build dist
