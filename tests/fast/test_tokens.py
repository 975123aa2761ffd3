"""localpager.tokens: the one TokenCounter protocol and the counters that implement it."""

from __future__ import annotations

from fakes import ScriptedBackend

from localpager.backends.tokenizers import BackendTokenCounter
from localpager.core.tokens import ApproxTokenCounter
from localpager.memory.api import LocalPager


def test_a_backend_counter_counts_with_the_backends_tokenizer_under_its_models_name():
    backend = ScriptedBackend(model_name="tiny.gguf")
    counter = BackendTokenCounter(backend)
    assert counter.name == "tiny.gguf"
    assert [counter.count(t) for t in ("", "one two three", "peanut")] == \
        [backend.count_tokens(t) for t in ("", "one two three", "peanut")]
    assert ApproxTokenCounter().count("12345678") == 2


def test_a_pager_with_a_loaded_backend_counts_with_it(tmp_path):
    backend = ScriptedBackend(model_name="tiny.gguf")
    counter = LocalPager(tmp_path / "m.db", backend=backend).counter()
    assert isinstance(counter, BackendTokenCounter) and counter.backend is backend
