PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: up test lint typecheck pytest bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

up: $(STAMP)
	$(BIN)/calagent up

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy libs services tests

pytest: $(STAMP)
	$(BIN)/pytest -q

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/calagent bench

clean:
	rm -rf $(VENV) .calagent .mypy_cache .pytest_cache .ruff_cache
