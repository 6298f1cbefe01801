# The two commands a user types are `make run` and `make test`; both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run test check lint typecheck imports pytest bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

## run: set up, then serve the bridge on its embedded default (private NATS, SQLite board)
run: $(STAMP)
	$(BIN)/cotal-tasks serve $(ARGS)

## test: set up, then every check
test: check

## check: ruff, ruff format --check, mypy --strict, import-linter, pytest
check: lint typecheck imports pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

pytest: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

## bench: every performance figure beside its limit measured in the same run (medians, spread);
##        BENCH_ARGS="board wire scale" picks parts, --rounds N sets the rounds
bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache build *.egg-info
