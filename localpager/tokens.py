"""Token counting with the chat model's own tokenizer.

The budget is in the model's tokens, so it must be counted with the model's vocabulary; loading a
GGUF file with ``vocab_only=True`` takes a fraction of a second and no weights.
"""

from __future__ import annotations

import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Protocol


class TokenCounter(Protocol):
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


class ApproxTokenCounter:
    """About four characters a token. Only for tests of pure logic, never for a real budget."""

    name = "approx"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / 4)
