# The one place commands live. README, CI and hooks call these targets.
PYTHON ?= python3
CARGO ?= cargo

.PHONY: help install dev test test-rust test-python langgraph-suites bench-smoke lint fmt bench bench-quick demo wheel wheel-test clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

install:  ## build (release) and install the package
	$(PYTHON) -m pip install -q .

dev:  ## install the package editable with the test and lint tools
	$(PYTHON) -m pip install -q -e '.[dev]'

test: dev lint test-rust test-python bench-smoke wheel-test  ## everything CI runs: lint, Rust tests, Python tests, the benchmarks' smoke run, the wheel

test-rust:  ## the core's cargo tests, with the fault-injection tests (MEMCOMMIT_FAULT_SEEDS=500 for the long setting)
	$(CARGO) test --locked -p memcommit-core --features fault-injection
	$(CARGO) test --locked -p memcommit-wire

test-python: langgraph-suites  ## the Python suite (kill -9 loop at its CI setting; MEMCOMMIT_KILLS=10000 for the long one)
	$(PYTHON) -m pytest -q

LANGGRAPH_SUITES = .cache/langgraph-suites

langgraph-suites:  ## fetch the installed langgraph-checkpoint(-sqlite)'s sdists, whose store tests tests/test_langgraph_upstream.py runs, into .cache/ (once per version)
	mkdir -p $(LANGGRAPH_SUITES)
	@for dist in langgraph-checkpoint langgraph-checkpoint-sqlite; do \
	  version="$$($(PYTHON) -c 'import sys; from importlib.metadata import version; print(version(sys.argv[1]))' $$dist)" || exit 1; \
	  stem="$$(echo $$dist | tr - _)"; \
	  if [ -f "$(LANGGRAPH_SUITES)/$$stem-$$version.tar.gz" ] || [ -f "$(LANGGRAPH_SUITES)/$$dist-$$version.tar.gz" ]; then \
	    echo "$$dist $$version: already in $(LANGGRAPH_SUITES)"; \
	  else \
	    echo "$(PYTHON) -m pip download -q --no-deps --no-binary $$dist -d $(LANGGRAPH_SUITES) $$dist==$$version"; \
	    $(PYTHON) -m pip download -q --no-deps --no-binary $$dist -d $(LANGGRAPH_SUITES) "$$dist==$$version" || exit 1; \
	  fi; \
	done

bench-smoke:  ## the benchmark suite once, untimed, at its tiny size: a broken benchmark fails
	$(PYTHON) -m pytest -q benches/suite --benchmark-disable --bench-size tiny

lint:  ## rustfmt, clippy, ruff, mypy --strict, stubtest, the workflows against GitHub's schema
	$(CARGO) fmt --all --check
	$(CARGO) clippy --locked --all-targets -- -D warnings
	$(CARGO) clippy --locked -p memcommit-core --all-targets --features fault-injection -- -D warnings
	$(PYTHON) -m ruff check python tests benches examples
	$(PYTHON) -m ruff format --check python tests benches examples
	$(PYTHON) -m mypy
	$(PYTHON) -m mypy.stubtest memcommit._native
	$(PYTHON) -m check_jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml

fmt:  ## format Rust and Python
	$(CARGO) fmt --all
	$(PYTHON) -m ruff format python tests benches examples
	$(PYTHON) -m ruff check --fix python tests benches examples

BENCH_SIZE ?= 1m
BENCH_JSON ?= bench-data/bench-$(BENCH_SIZE).json

bench:  ## the pytest-benchmark suite (release build) at BENCH_SIZE (tiny 1m 10m 50m; default 1m): its JSON, then BENCHMARKS.md's tables
	$(PYTHON) -m pip install -q '.[bench]'
	mkdir -p $(dir $(BENCH_JSON))
	$(PYTHON) -m pytest benches/suite --bench-size $(BENCH_SIZE) --benchmark-json $(BENCH_JSON)
	$(PYTHON) benches/tables.py $(BENCH_JSON) --write BENCHMARKS.md --command 'make bench BENCH_SIZE=$(BENCH_SIZE)'

bench-quick:  ## side-by-side benchmarks against SQLite and LMDB at a small size (benches/compare.py --quick)
	$(PYTHON) -m pip install -q '.[bench]'
	$(PYTHON) benches/compare.py --quick

demo:  ## the README's main job
	memcommit demo

WHEEL_DIR ?= dist

wheel:  ## a manylinux2014 wheel for this CPython in dist/, linked with zig; auditwheel checks the tag
	$(PYTHON) -m pip install -q 'maturin>=1.7,<2' ziglang auditwheel
	rm -f $(WHEEL_DIR)/memcommit-*.whl
	# zig's clang, unlike gcc, does not take POPCNT as implied by the AVX-512 flags the vector
	# kernels of the approximate index (numkong, under usearch) are built with: say it for all
	# C code. Every x86-64 CPU since 2008 has it (x86-64-v2).
	CFLAGS_x86_64_unknown_linux_gnu=-mpopcnt $(PYTHON) -m maturin build --release --locked --zig --compatibility manylinux2014 --out $(WHEEL_DIR)
	$(PYTHON) -m auditwheel show $(WHEEL_DIR)/memcommit-*.whl | tee $(WHEEL_DIR)/auditwheel.txt
	grep -q '"manylinux_2_17_' $(WHEEL_DIR)/auditwheel.txt

wheel-test: wheel  ## install that wheel in a fresh virtualenv (no cargo on PATH): demo and contract suite
	MEMCOMMIT_WHEEL="$$(ls $(WHEEL_DIR)/memcommit-*.whl)" $(PYTHON) -m pytest -q -m wheel tests/test_wheel.py

clean:
	$(CARGO) clean
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache $(LANGGRAPH_SUITES)
