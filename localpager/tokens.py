"""Token counting with the chat model's own tokenizer.

The budget is in the model's tokens, so it must be counted with the model's vocabulary. Everything that
counts (the pager, the simulator, ingest) takes a ``TokenCounter``; the counters are:

- ``LlamaTokenCounter``: a GGUF file's vocabulary, loaded with ``vocab_only=True`` (a fraction of a
  second, no weights): counts before, or without, loading the model (``counter_for`` caches one per file);
- ``BackendTokenCounter``: a loaded ``ChatBackend``'s own ``count_tokens`` (no second load; the only
  way for a backend whose model is not a local GGUF file, such as a served one);
- ``ApproxTokenCounter``: four characters a token, for tests of pure logic only.

``api.Conversation`` pages with a stand-in that loads the tokenizer on its first count, so that opening a
conversation loads nothing.
"""

from __future__ import annotations

import math
import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .backends.base import ChatBackend


class TokenCounter(Protocol):
    """``name`` says whose tokens these are (stored with a conversation, so counts made with another
    model's tokenizer are redone); ``count`` is the number of tokens of ``text`` as plain text."""

    name: str

    def count(self, text: str) -> int: ...


class LlamaTokenCounter:
    """Counts tokens with a GGUF model's vocabulary (no weights loaded)."""

    def __init__(self, model_path: str | os.PathLike):
        from .backends.llama import load_llama

        self.path = Path(model_path)
        self.name = self.path.name
        self._llama = load_llama(self.path, vocab_only=True)

    def tokenize(self, text: str) -> list[int]:
        return self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    def count(self, text: str) -> int:
        return len(self.tokenize(text)) if text else 0


@lru_cache(maxsize=4)
def counter_for(model_path: str | None = None) -> LlamaTokenCounter:
    """A cached tokenizer for ``model_path`` (default: the manifest's chat model)."""
    from .modelpaths import chat_model_path

    return LlamaTokenCounter(chat_model_path(model_path))


class BackendTokenCounter:
    """Counts with a loaded chat backend's own tokenizer."""

    def __init__(self, backend: ChatBackend):
        self.backend = backend
        self.name = getattr(backend, "model_name", backend.name)

    def count(self, text: str) -> int:
        return self.backend.count_tokens(text)


class ApproxTokenCounter:
    """About four characters a token. Only for tests of pure logic, never for a real budget."""

    name = "approx"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / 4)
