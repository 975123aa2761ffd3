"""Importing localpager and building its objects leave the process alone: no environment variables set,
no thread counts changed. FAISS searches with one thread (measured faster at this size) only while it
searches; the embedder loads offline from its directory without switching the hub off for the process
(with the real embedder: tests/model/test_side_effects.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from fakes import HashEmbedder
from helpers import ENV_KEYS, clean_env

from localpager.core.pager import PagingConfig, page_conversation
from localpager.core.records import Turn
from localpager.core.tokens import ApproxTokenCounter
from localpager.retrieval.index import SEARCH_THREADS, SignalIndex, PageIndex


def test_importing_localpager_sets_nothing_and_loads_nothing_heavy():
    code = (
        "import json, os, sys\n"
        "before = dict(os.environ)\n"
        "import localpager, localpager.memory.api, localpager.cli, localpager.retrieval.index, localpager.retrieval.embedder\n"
        "from localpager import LocalPager, PagingConfig, RecallSettings\n"
        "heavy = [m for m in ('torch', 'faiss', 'llama_cpp', 'sentence_transformers') if m in sys.modules]\n"
        "print(json.dumps({'env': dict(os.environ) == before, 'heavy': heavy}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"env": True, "heavy": []}


def test_constructing_an_embedder_touches_no_environment(tmp_path, monkeypatch):
    from localpager.retrieval.embedder import Embedder

    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    (tmp_path / "config.json").write_text("{}")
    before = dict(os.environ)
    embedder = Embedder(tmp_path)
    assert embedder.path == tmp_path and embedder._model is None
    assert dict(os.environ) == before


def paged(store, n: int = 30):
    """Conversation 'c' of ``n`` turns, five a page, stored."""
    turns = [Turn(role="user" if i % 2 == 0 else "assistant", text=f"turn {i} about topic {i // 5}", index=i)
             for i in range(n)]
    pager = page_conversation(turns, ApproxTokenCounter(), PagingConfig(boundary="fixed_5", budget=60))
    store.save_conversation("c", turns, pager.pages)
    return turns, pager


class ThreadSpy:
    """Wraps a FAISS index and records the OpenMP thread count each search runs with."""

    def __init__(self, index):
        self.inner, self.seen = index, []

    def search(self, *args, **kwargs):
        import faiss

        self.seen.append(faiss.omp_get_max_threads())
        return self.inner.search(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_faiss_searches_with_one_thread_and_leaves_the_count_as_it_was(store):
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(2)
    try:
        turns, pager = paged(store)
        index = PageIndex(store, HashEmbedder())
        index.update("c", pager.pages, turns, pager.bookmark)
        signal_index = index.signal("turn")
        assert isinstance(signal_index, SignalIndex) and faiss.omp_get_max_threads() == 2  # building: untouched
        spy = signal_index.index = ThreadSpy(signal_index.index)
        hits = index.rank("c", "topic 3", [p.page_id for p in pager.pages])
        assert hits and hits[0].page_id == 4
        assert spy.seen == [SEARCH_THREADS] and faiss.omp_get_max_threads() == 2  # searching: one, then back

        def broken(*args, **kwargs):
            raise RuntimeError("search failed")

        spy.inner = type("Broken", (), {"search": staticmethod(broken)})()
        with pytest.raises(RuntimeError):
            signal_index.search(np.zeros(HashEmbedder().dim, dtype=np.float32), list(signal_index.rows)[:3])
        assert faiss.omp_get_max_threads() == 2  # restored after a failure too
    finally:
        faiss.omp_set_num_threads(before)


def test_another_threads_faiss_setting_is_not_touched(store):
    import faiss

    turns, pager = paged(store)
    index = PageIndex(store, HashEmbedder())
    index.update("c", pager.pages, turns, pager.bookmark)
    seen = []

    def other():
        faiss.omp_set_num_threads(2)
        index.rank("c", "topic 2", [p.page_id for p in pager.pages])
        seen.append(faiss.omp_get_max_threads())

    worker = threading.Thread(target=other)
    worker.start()
    worker.join()
    assert seen == [2]


