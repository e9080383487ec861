# driftline: `make demo` runs the product, `make test` runs the test suite.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev
PYTEST_ARGS ?=

.PHONY: demo test lint typecheck bench clean

$(STAMP): pyproject.toml
	@echo ">> creating the virtual environment in $(VENV) (first run: about 2 minutes)"
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/driftline demo $(DEMO_ARGS)

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

typecheck: $(STAMP)
	$(VENV)/bin/mypy driftline collector alerts drift judges serving dashboard

bench: $(STAMP)
	$(PY) benchmarks/ingest.py

clean:
	rm -rf $(VENV) driftline-data .pytest_cache .mypy_cache .ruff_cache

# Serving venv (vLLM CPU build + conversion tools, ~2.5 min / 3.5 GB once) and the demo model.
.PHONY: serving
serving: $(STAMP)
	$(VENV)/bin/driftline serving install
	$(VENV)/bin/driftline serving prepare-model
