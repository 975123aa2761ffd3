"""Token counters that read a chat model's own vocabulary (``core.tokens.TokenCounter``).

- ``LlamaTokenCounter``: a GGUF file's vocabulary, loaded with ``vocab_only=True`` (a fraction of a
  second, no weights): counts before, or without, loading the model (``counter_for`` caches one per file);
- ``BackendTokenCounter``: a loaded ``ChatBackend``'s own ``count_tokens`` (no second load; the only
  way for a backend whose model is not a local GGUF file, such as a served one).

``memory.conversation.Conversation`` pages with a stand-in that loads the tokenizer on its first count, so that
opening a conversation loads nothing.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import ChatBackend


class LlamaTokenCounter:
    """Counts tokens with a GGUF model's vocabulary (no weights loaded)."""

    def __init__(self, model_path: str | os.PathLike):
        from .llama import internals, load_llama

        self.path = Path(model_path)
        self.name = self.path.name
        self._llama = load_llama(self.path, vocab_only=True)
        self._count = internals().count_tokens

    def tokenize(self, text: str) -> list[int]:
        return self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    def count(self, text: str) -> int:
        return self._count(self._llama, text.encode("utf-8")) if text else 0


@lru_cache(maxsize=4)
def counter_for(model_path: str | None = None) -> LlamaTokenCounter:
    """A cached tokenizer for ``model_path`` (default: the manifest's chat model)."""
    from ..core.modelpaths import chat_model_path

    return LlamaTokenCounter(chat_model_path(model_path))


class BackendTokenCounter:
    """Counts with a loaded chat backend's own tokenizer."""

    def __init__(self, backend: ChatBackend):
        self.backend = backend
        self.name = backend.model_name or backend.name

    def count(self, text: str) -> int:
        return self.backend.count_tokens(text)
