"""Shared fixtures. The real default models are loaded once per test session; the fakes of
``tests/fakes.py`` stand in for them in the fast layer (``make test-fast``).

Markers (pyproject.toml): ``model`` for every test that loads the GGUF file (the chat model or only its
tokenizer), ``embedder`` for every test that runs the real sentence-transformers embedder, ``slow`` for
tests of more than a few seconds. A test without ``model`` that reaches for the GGUF file, or without
``embedder`` that loads the real embedder (or imports torch), fails here with a message saying which
marker it lacks; subprocesses (the CLI tests) are caught by ``make test-fast`` pointing
``LOCALPAGER_MODEL`` and ``LOCALPAGER_EMBEDDER`` at nothing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `from fakes import ...` in test modules

from fakes import HashEmbedder, ScriptedBackend  # noqa: E402

MODEL_FIXTURES = {"backend", "counter"}
HEAVY_MODULES = ("torch", "sentence_transformers", "transformers")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if item.get_closest_marker("model") is None:
        used = sorted(MODEL_FIXTURES & set(item.fixturenames))
        if used:
            pytest.fail(f"{item.nodeid} uses the real model (fixture {', '.join(used)}) but is not marked "
                        "@pytest.mark.model", pytrace=False)


@pytest.fixture(autouse=True)
def _models_only_when_marked(request, monkeypatch):
    """Refuse the real GGUF file in tests not marked ``model`` and the real embedder (and torch) in tests
    not marked ``embedder``."""
    node = request.node
    if node.get_closest_marker("model") is None:
        import localpager.backends.llama as llama

        def no_gguf(path, **kwargs):
            pytest.fail(f"{node.nodeid} loads the GGUF model {path} but is not marked @pytest.mark.model",
                        pytrace=False)

        monkeypatch.setattr(llama, "load_llama", no_gguf)
    heavy_before = {m for m in HEAVY_MODULES if m in sys.modules}
    if node.get_closest_marker("embedder") is None:
        import localpager.embedder as embedder

        def no_embedder(self):
            pytest.fail(f"{node.nodeid} loads the real embedder but is not marked @pytest.mark.embedder",
                        pytrace=False)

        monkeypatch.setattr(embedder.Embedder, "_load", no_embedder)
    yield
    if node.get_closest_marker("embedder") is None and node.get_closest_marker("model") is None:
        imported = sorted(m for m in HEAVY_MODULES if m in sys.modules and m not in heavy_before)
        if imported:
            pytest.fail(f"{node.nodeid} imported {', '.join(imported)} but is marked neither embedder nor model",
                        pytrace=False)


# -- the real models ---------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def backend():
    """The real SmolLM2-135M GGUF in llama.cpp."""
    from localpager.backends import load_backend

    return load_backend(n_ctx=2048)


@pytest.fixture(scope="session")
def counter():
    """The real SmolLM2 tokenizer (vocabulary only)."""
    from localpager.tokens import counter_for

    return counter_for()


@pytest.fixture
def store(tmp_path):
    from localpager.store import Store

    s = Store(tmp_path / "store.db")
    yield s
    s.close()


# -- the fakes (tests/fakes.py) ----------------------------------------------------------------------
@pytest.fixture
def fake_backend():
    """A ScriptedBackend with an empty script: ``fake_backend.push("reply", ...)`` before it is called."""
    return ScriptedBackend()


@pytest.fixture
def fake_embedder():
    return HashEmbedder()


@pytest.fixture
def fake_pager(tmp_path):
    """A factory of ``LocalPager`` on a store in ``tmp_path`` with a ScriptedBackend and a HashEmbedder.

    ``fake_pager(script=(), *, backend=None, path=None, embedder=None, **LocalPager_options)``; a
    second call with the same ``path`` reopens the store (as another process would)."""
    from localpager.api import LocalPager
    from localpager.index import PageIndex

    opened = []

    def make(script=(), *, backend=None, path=None, embedder=None, **options):
        lp = LocalPager(path or tmp_path / "store.db", backend=backend or ScriptedBackend(script), **options)
        lp._index = PageIndex(lp.store, embedder or HashEmbedder())
        opened.append(lp)
        return lp

    yield make
    for lp in opened:
        lp.close()
