"""Shared fixtures. The real default models are loaded once per test session."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


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
