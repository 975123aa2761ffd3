"""The lab's choices: the simulator's retrievers, the evaluation's strategies, the generated phrasing sets.

Standard library only (see ``core.choices``): the CLI offers these without loading the lab.
"""

from __future__ import annotations

from enum import StrEnum


class RetrieverName(StrEnum):
    """The lab's rankers of evicted pages for a question (``lab.retrievers``, ``simulate --retriever``): what a
    recall would have found. Not a page choice (who picks what a recall injects) nor a selector (the object that
    picks), though the eval's baselines use a retriever as their selector."""

    OVERLAP = "overlap"  # distinct content words shared with the question
    BM25 = "bm25"
    RERANK = "rerank"  # the product's ranking (dense and BM25 fused, a page scoring as its best turn)
    DENSE = "dense"  # the embedding half of rerank alone
    ORACLE = "oracle"  # the pages holding the probe's evidence: the ceiling


# The simulator's clairvoyant reference eviction policy (``lab.simulate.Belady``): an eviction the simulator
# takes beside the ``core.choices.Eviction`` policies, never one a conversation can be paged with.
BELADY = "belady"


class EvalStrategy(StrEnum):
    """The evaluation's strategies (``lab.evaluate``, ``eval --strategy``)."""

    BOOKMARKS = "bookmarks"  # the product: bookmarks, grammar-constrained recall, reranking
    TRUNCATION = "truncation"  # the last turns that fit the budget, nothing else
    FULL = "full"  # as much history as the context holds
    BM25 = "bm25"  # the top evicted pages by BM25, injected on every probe
    OVERLAP = "overlap"  # the same by shared words
    SEARCH = "search"  # the model writes a search query; its best-matching evicted turn is injected


class Phrasing(StrEnum):
    """The template sets generated conversations state and ask their facts in (``lab.synthetic``): each is
    ``lab/data/phrasing_<name>.json`` (its format: ``lab.synthetic_data``)."""

    TUNING = "tuning"  # the generator's own templates: settings were chosen on it
    DEV = "dev"  # written apart, tuned on beside tuning so that settings generalize
    DEV2 = "dev2"  # a second development set written apart
    HELDOUT = "heldout"  # written apart, never tuned on
    CHECK = "check"  # written apart on 2026-12-06, never tuned on: the check set


class QuestionStyle(StrEnum):
    """How generated conversations ask about their facts (``lab.synthetic``, ``lab generate --questions``)."""

    EXPLICIT = "explicit"  # a question about the fact itself ("asks"), which may ask about the past
    IMPLICIT = "implicit"  # a present need that depends on the fact without naming it ("implicit")
    BOTH = "both"  # the two, the implicit one right after the explicit one
