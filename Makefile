# The two commands of the README. Both create and use a local .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	@$(BIN)/python examples/demo.py

test: $(STAMP)
	$(BIN)/ruff check vtasm vtasim vtacc tests benchmarks examples
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check vtasm vtasim vtacc tests benchmarks examples

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
