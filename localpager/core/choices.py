"""The paging core's choices, and the one way any layer turns a name into a choice.

Every set of choices in localpager is a ``StrEnum`` defined once, in the ``choices`` module of the lowest
layer that owns it (here: boundaries, evictions, keyword strategies, bookmark formats, stemmers). A member is its
own name as a string (``Eviction.LRU == "lru"``), so settings stored as JSON, SQL rows and click options
read and write them unchanged. ``choose`` turns a name into a member with the one message an unknown name
gets everywhere (library, CLI, server). Standard library only: the CLI builds its options from these
modules without loading numpy or a model.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import TypeVar

C = TypeVar("C", bound=StrEnum)


def unknown(what: str, value: object, names: Iterable[str]) -> ValueError:
    """The error for a name that is none of ``names``: ``unknown <what> 'x'; use one of a, b, c``."""
    return ValueError(f"unknown {what} {value!r}; use one of {', '.join(map(str, names))}")


def choose(kind: type[C], value: object, what: str, *, offered: Iterable[C] | None = None,
           also: Iterable[str] = ()) -> C:
    """``value`` as a member of ``kind``, or ``unknown(...)`` naming what may be chosen.

    ``offered``: the members a person picks from (default: all); another member is still accepted but never
    listed (an internal one, such as the lab's recall mode ``selector``). ``also``: names the caller accepts
    besides the members (``fixed_N``, the simulator's ``belady``), listed after them."""
    try:
        return kind(value)
    except ValueError:
        raise unknown(what, value, [*(offered if offered is not None else kind), *also]) from None


class Boundary(StrEnum):
    """The named page boundary policies (``core.boundaries``). ``fixed_N`` and ``exchange_N`` take any N:
    these are the sizes offered by name."""

    FIXED_5 = "fixed_5"
    FIXED_10 = "fixed_10"
    FIXED_20 = "fixed_20"
    EXCHANGE_5 = "exchange_5"
    TOPIC_SHIFT = "topic_shift"


DEFAULT_BOUNDARY = Boundary.FIXED_20
PARAMETRIC_BOUNDARIES = ("fixed_N", "exchange_N")  # N a positive number of turns or exchanges


class Eviction(StrEnum):
    """Eviction policies (``core.eviction``): which resident page leaves the prompt first."""

    FIFO = "fifo"
    LRU = "lru"
    LFU = "lfu"
    HYBRID = "hybrid"
    COOPERATIVE = "cooperative"  # small talk first, then the pages the model names


DEFAULT_EVICTION = Eviction.FIFO


class KeywordStrategy(StrEnum):
    """How a page's bookmark keywords are chosen (``core.keywords``): locally, or by the local model
    (``runtime.assist``), in which case a page carries the local fallback's keywords until the model ran."""

    RANDOM = "random"
    HEURISTIC = "heuristic"
    TFIDF = "tfidf"
    LLM_CONTEXTUAL = "llm-contextual"
    LLM_BATCH = "llm-batch"
    HYBRID = "hybrid"
    AUTO = "auto"

    @property
    def uses_model(self) -> bool:
        return self in MODEL_STRATEGIES


MODEL_STRATEGIES = (KeywordStrategy.LLM_CONTEXTUAL, KeywordStrategy.LLM_BATCH, KeywordStrategy.HYBRID,
                    KeywordStrategy.AUTO)
DEFAULT_KEYWORDS = KeywordStrategy.HEURISTIC


class BookmarkFormat(StrEnum):
    """How an evicted page's bookmark reads in the prompt (``core.bookmarks``)."""

    ID = "id"  # [p3]
    MINIMAL = "minimal"  # [p3:allergy,peanut]
    MEDIUM = "medium"  # [p3:allergy,peanut "the first words of its best line"]
    STRUCTURED = "structured"  # [p3:t=40-59;e=allergy,peanut]


DEFAULT_BOOKMARK_FORMAT = BookmarkFormat.MINIMAL


class Stemmer(StrEnum):
    """How ``text.content_words`` folds a word's ending (a setting of the lexical ranking, not offered by the CLI)."""

    NONE = "none"
    PLURAL = "plural"  # -ing, -ed, -ly, -es, -s: the stand-in for the Porter stemming of LoCoMo's scorer
    LIGHT = "light"  # plurals, -ies and doubled consonants: BM25's terms
