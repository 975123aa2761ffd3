"""Counting tokens: the one protocol every part that counts takes, and a four-characters estimate.

The budget is in the chat model's tokens, so it must be counted with the model's vocabulary. Everything that
counts (the pager, the simulator, ingest) takes a ``TokenCounter``; the counters that read a model's
vocabulary live with the backends (``backends.tokenizers``). ``ApproxTokenCounter`` estimates, for tests of
pure logic only.
"""

from __future__ import annotations

import math
from typing import Protocol


class TokenCounter(Protocol):
    """``name`` says whose tokens these are (stored with a conversation, so counts made with another
    model's tokenizer are redone); ``count`` is the number of tokens of ``text`` as plain text."""

    name: str

    def count(self, text: str) -> int: ...


class ApproxTokenCounter:
    """About four characters a token. Only for tests of pure logic, never for a real budget."""

    name = "approx"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / 4)
