# driftline: `make demo` runs the product, `make test` runs the test suite.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev
PYTEST_ARGS ?= -n 2 --dist loadgroup

.PHONY: demo test test-deps lint typecheck bench clean

$(STAMP): pyproject.toml
	@echo ">> creating the virtual environment in $(VENV) (first run: about 4 minutes)"
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/driftline demo $(DEMO_ARGS)

test: $(STAMP) test-deps
	$(PY) -m pytest $(PYTEST_ARGS)

# What the `browser` and `vllm` tests need. Chromium + ChromeDriver: installed with apt when we
# are root (else the browser tests skip and say which command enables them). The vLLM CPU venv
# (`make serving`, ~4 min and ~6 GB once) is built here only when CI is set; locally the vllm
# tests skip with that reason. Under CI a missing requirement fails its tests (tests/conftest.py).
test-deps:
	@if ! command -v chromedriver >/dev/null || ! { command -v chromium >/dev/null || command -v chromium-browser >/dev/null; }; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo ">> installing chromium + chromium-driver for the browser tests (apt)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else \
	    echo ">> browser tests will be skipped: run 'sudo apt-get install chromium chromium-driver' to enable them"; \
	  fi; \
	fi
	@if [ -n "$$CI" ]; then $(MAKE) --no-print-directory serving; \
	elif [ ! -x .driftline/vllm-venv/bin/python ]; then \
	  echo ">> vllm tests will be skipped: run 'make serving' (~4 min, ~6 GB once) to enable them"; \
	fi

# Static checks (`.ci/run` runs both before the tests). `lint` runs all three tools even when one
# fails, so that one run lists every error, and fails if any failed.
lint: $(STAMP)
	@status=0; \
	$(VENV)/bin/ruff check . || status=1; \
	$(VENV)/bin/ruff format --check . || status=1; \
	$(VENV)/bin/lint-imports || status=1; \
	exit $$status

typecheck: $(STAMP)
	$(VENV)/bin/mypy driftline collector alerts drift judges serving dashboard

bench: $(STAMP)
	$(PY) benchmarks/ingest.py

clean:
	rm -rf $(VENV) driftline-data .pytest_cache .mypy_cache .ruff_cache

# Serving venv (vLLM CPU build + conversion tools, ~4 min / ~6 GB once) and the demo model.
.PHONY: serving
serving: $(STAMP)
	$(VENV)/bin/driftline serving install
	$(VENV)/bin/driftline serving prepare-model
