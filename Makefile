# sessiontree: the developer loop. `make help` lists the targets; CONTRIBUTING.md explains them.
#
# Everything runs in the project's virtual environment .venv (made by `make dev` when missing).
# A release build (LTO) is only for wheels; `make dev` builds with Cargo's dev-fast profile.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV ?= .venv
PY := $(VENV)/bin/python
# maturin, ruff, mypy and zig are found on the venv's PATH (maturin runs `python -m ziglang`)
export PATH := $(abspath $(VENV))/bin:$(PATH)
# pytest-xdist workers for `make test` (the machine has 2 cores)
JOBS ?= 2
# the wheels `make wheel` builds: this machine's target, plus aarch64 where its Rust target is installed
AARCH64 := aarch64-unknown-linux-gnu
HAVE_AARCH64 := $(shell rustup target list --installed 2>/dev/null | grep -qx $(AARCH64) && echo yes)

.PHONY: help dev test test-all lint fmt bench wasm release-tools wheel sdist sdist-check ci clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 14

$(PY):
	python3 -m venv $(VENV)

dev: $(PY)  ## build the extension into .venv (dev-fast profile: no LTO, incremental) with the test, release and dev extras
	$(PY) -m maturin --version >/dev/null 2>&1 || $(PY) -m pip install -q -U pip 'maturin>=1.7,<2'
	$(PY) -m maturin develop --profile dev-fast --extras test,release,dev -q

test:  ## the fast loop: every test not marked slow, on $(JOBS) workers (at most 90 s here)
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -m "not slow" -n $(JOBS)

test-all:  ## every test, as CI runs them (slow ones included, on $(JOBS) workers; then tests/perf alone; then cargo test)
	$(PY) -m pytest -q -n $(JOBS) --ignore=tests/perf
	$(PY) -m pytest -q tests/perf
	cargo test

lint:  ## ruff check, ruff format --check, cargo fmt --check, clippy -D warnings, stubtest, mypy --strict
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	cargo fmt --check
	cargo clippy --all-targets --features python -- -D warnings
	$(PY) -m mypy.stubtest sessiontree._core
	$(PY) -m mypy --strict python/sessiontree

fmt:  ## format Python and Rust in place
	$(PY) -m ruff format .
	cargo fmt

bench:  ## the pytest-benchmark suite (sizes up to SESSIONTREE_BENCH_MAX_MB, default 50)
	$(PY) -m pytest -c benches/pytest.ini benches --benchmark-only

# The HTML view's search matcher (rust/wasm/matcher.rs: the CLI's query.rs and tokenize.rs) as
# WebAssembly, committed and embedded in every exported page. Built with Debian 12's rustc 1.63 and
# its wasm32 std (`apt-get install rustc libstd-rust-dev-wasm32 lld-14`), which reproduce the
# committed bytes (tests/html/test_html_search_wasm.py rebuilds into WASM_OUT and compares).
WASM_RUSTC ?= /usr/bin/rustc
WASM_OUT ?= python/sessiontree/html/matcher.wasm
WASM_FLAGS := --edition 2021 --target wasm32-unknown-unknown -O -C codegen-units=1 -C lto -C strip=symbols --crate-type cdylib -A dead_code

wasm:  ## rebuild the HTML view's search matcher (python/sessiontree/html/matcher.wasm; Debian's rustc 1.63)
	$(WASM_RUSTC) $(WASM_FLAGS) rust/wasm/matcher.rs -o $(WASM_OUT)
	chmod 644 $(WASM_OUT)

release-tools: $(PY)  ## install the release extra (maturin, ziglang, auditwheel) into .venv
	mkdir -p target
	$(PY) -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['release']))" >target/release-requirements.txt
	$(PY) -m pip install -q -r target/release-requirements.txt

# A second full release build: `pip install .` builds for this machine's glibc into target/release,
# the wheel with zig for glibc 2.17 into target/<triple>/release with zig's compilers and linker, so
# cargo cannot reuse the first (measured: forcing the same maturin flags on pip's build still
# rebuilds, maturin hands the two builds different zig wrappers and PYO3_PYTHON). Checked against
# maturin 1.16's docs (maturin.rs/config) and its PEP 517 backend: [tool.maturin] has no key for zig
# or the target, and the backend passes `--compatibility off` unless MATURIN_PEP517_ARGS or pip's
# -C maturin.build-args say otherwise; `use-base-python` only keeps PYO3_PYTHON stable between
# venvs. So a plain `pip install .` can never be the zig/manylinux2014 build this target makes.
wheel: release-tools  ## abi3 manylinux2014 wheels into dist/ (zig as the linker), each checked with auditwheel
	rm -f dist/*.whl
	$(PY) -m maturin build --release --zig --compatibility manylinux2014 --out dist
ifeq ($(HAVE_AARCH64),yes)
	$(PY) -m maturin build --release --zig --compatibility manylinux2014 --target $(AARCH64) --out dist
else
	@echo "no aarch64 wheel: the Rust target $(AARCH64) is not installed (rustup target add $(AARCH64))"
endif
	$(PY) .ci/check_wheel.py dist/*.whl

sdist:  ## the source distribution into dist/
	rm -f dist/*.tar.gz
	$(PY) -m maturin sdist --out dist

sdist-check: sdist  ## build a wheel from dist/'s sdist in an isolated build (as pip does from an index)
	rm -rf target/sdist-check
	# Cargo's dev profile in this tree's target/: the dependencies `cargo test` built are reused
	# (CI: 2 min of CPU instead of a cold build); only the crate and what its features add compile
	CARGO_TARGET_DIR=$(abspath target) MATURIN_PEP517_ARGS="--profile dev" $(PY) -m pip wheel -q --no-deps -w target/sdist-check dist/sessiontree-*.tar.gz
	ls target/sdist-check/sessiontree-*.whl

ci:  ## what CI runs, from scratch (.ci/run)
	bash .ci/run

clean:  ## remove build outputs (target/, dist/)
	rm -rf target dist
