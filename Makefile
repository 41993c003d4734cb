# The two commands of the README. Both create and use a local .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	@mkdir -p out
	$(BIN)/vtasm assemble examples/vadd.vasm -o out/vadd.vbin
	$(BIN)/vtasm dump out/vadd.vbin --uops
	$(BIN)/python examples/vadd_data.py inputs out
	$(BIN)/vtasim run out/vadd.vbin --input A=out/a.npy --input B=out/b.npy --output C=out/c.npy \
		--trace --profile --check-races --lint
	$(BIN)/python examples/vadd_data.py check out

test: $(STAMP)
	$(BIN)/ruff check vtasm vtasim vtacc tests benchmarks examples
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check vtasm vtasim vtacc tests benchmarks examples

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
