# The two commands a user types are `make run` and `make test`; both set up .venv first,
# through the lock file (constraints.txt): `make run` installs what serving needs, `make
# test` adds the development extras.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LOCK := constraints.txt
STAMP := $(VENV)/.installed-stamp
SERVE_STAMP := $(VENV)/.serve-stamp
LOCK_VENV := .lock-venv

.PHONY: run test test-fast check lint typecheck imports pytest bench clean lock

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# What serving needs: the package and its runtime dependencies, pinned by the lock file.
$(SERVE_STAMP): pyproject.toml $(LOCK) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -c $(LOCK) -e .
	@touch $(SERVE_STAMP)

# Everything: the runtime and the development extras (tests, linters), pinned alike.
$(STAMP): pyproject.toml $(LOCK) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -c $(LOCK) -e '.[dev]'
	@touch $(STAMP) $(SERVE_STAMP)

## run: set up (runtime only), then serve the bridge on its embedded default (private
##      NATS, SQLite board)
run: $(SERVE_STAMP)
	$(BIN)/cotal-tasks serve $(ARGS)

## lock: resolve the whole dependency set afresh within pyproject.toml's ranges, in a
##       scratch environment, and pin it in constraints.txt (commit the result)
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LOCK_VENV)/bin/python -m pip install --quiet -e '.[dev]'
	sed -n '/^#/p' $(LOCK) > $(LOCK).new
	$(LOCK_VENV)/bin/python -m pip freeze --exclude-editable >> $(LOCK).new
	mv $(LOCK).new $(LOCK)
	rm -rf $(LOCK_VENV)

## test: set up, then every check
test: check

## test-fast: the tests that start no nats-server, subprocess or browser and need no
##            PostgreSQL (tests/support/lanes.py marks the others), in under a minute
test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not broker and not postgres and not browser and not slow" $(PYTEST_ARGS)

## check: ruff, ruff format --check, mypy --strict, import-linter, pytest
check: lint typecheck imports pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

# The suite runs on every core (pytest-xdist); PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= auto
pytest: $(STAMP)
	$(BIN)/pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

## bench: every performance figure beside its limit measured in the same run (medians, spread);
##        BENCH_ARGS="board wire scale" picks parts, --rounds N sets the rounds
bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(LOCK_VENV) .mypy_cache .pytest_cache .ruff_cache build *.egg-info
