"""Retrieval's choices: who picks what a recall injects, and what of a page is compared with a question.

Standard library only (see ``core.choices``): the CLI offers these without loading numpy or FAISS.
"""

from __future__ import annotations

from enum import StrEnum


class PageChoice(StrEnum):
    """Who picks the pages a recall injects (``RerankSettings.page_choice``, ``eval --page-choice``); the
    object that does it is the selector (``runtime.selector.PageSelector``, here ``rerank.RerankSelector``)."""

    MODEL = "model"  # the pages the model named, in its order
    RERANK = "rerank"  # the ranking's best pages alone
    MODEL_RERANK = "model+rerank"  # the model's pages and the ranking's best, reranked (a bonus for a named page)


DEFAULT_PAGE_CHOICE = PageChoice.MODEL_RERANK


class Signal(StrEnum):
    """What of a page is embedded and compared with a question (``RerankSettings.signal``, ``eval --signal``).
    Each signal has its own vectors (``embeddings.kind`` in SQLite: the signal, and for a turn its index,
    ``turn:12``) and its own FAISS index beside the store."""

    BOOKMARK = "bookmark"  # the page's keywords (its bookmark line)
    TEXT = "text"  # the whole page
    TURN = "turn"  # every turn on its own; a page scores as its best turn (the product)


DEFAULT_SIGNAL = Signal.TURN
