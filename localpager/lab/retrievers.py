"""Retrievers: the evaluation's rankers of evicted pages for a question (``simulate --retriever``, and
the ``bm25`` and ``overlap`` strategies of ``eval``).

A retriever sees only the question and the candidate pages (in the simulator: the evicted ones), so
that the same retrievers rank pages in the paging simulator and in the end-to-end evaluation. The
``oracle`` is the exception: it knows the probe's evidence and gives the ceiling a retriever can reach.
A retriever only ranks: the selector (``runtime.PageSelector``) decides what one recall injects (the eval's
baselines use a retriever as theirs), and the page choice (``eval --page-choice``, ``lab.selectors``) says who
picks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ..core.choices import choose
from ..core.records import ROLES, Page, Turn
from ..core.text import content_words
from ..retrieval.embedder import Embedder, default_embedder
from ..retrieval.ranking import HybridSettings, LexicalIndex, embedding_scorer, rank_pages
from .choices import RetrieverName
from .fusion import Fusion, FusionSettings

# pages a retriever returns by default (simulate --k, the eval's bm25 and overlap strategies)
DEFAULT_TOP_PAGES = 3


class Retriever(Protocol):
    name: str

    def retrieve(self, question: str, pages: Sequence[Page], k: int) -> list[int]:
        """Ids of the pages most likely to answer ``question``, best first, at most ``k``."""


def _top(pages: Sequence[Page], scores: Sequence[float], k: int, floor: float = 0.0) -> list[int]:
    """Ids of the ``k`` best-scoring pages above ``floor``; ties keep page order (deterministic).

    The default floor means a page sharing nothing with the question is never picked.
    """
    ranked = sorted(range(len(pages)), key=lambda i: -scores[i])
    return [pages[i].page_id for i in ranked[:k] if scores[i] > floor]


class Overlap:
    """How many distinct content words of the question a page contains: the cheapest signal."""

    name = RetrieverName.OVERLAP

    def retrieve(self, question: str, pages: Sequence[Page], k: int) -> list[int]:
        wanted = set(content_words(question))
        scores = [len(wanted & set(content_words(p.text))) for p in pages]
        return _top(pages, scores, k)


class BM25:
    """BM25 (bm25s, Lucene variant) over the candidate pages, so idf is relative to those pages."""

    name = RetrieverName.BM25

    def retrieve(self, question: str, pages: Sequence[Page], k: int) -> list[int]:
        import bm25s  # a core dependency, imported only when this retriever is used

        if not pages:
            return []
        index = bm25s.BM25()
        index.index([list(content_words(p.text)) for p in pages], show_progress=False)
        query = [w for w in dict.fromkeys(content_words(question)) if w in index.vocab_dict]
        if not query:
            return []
        return _top(pages, index.get_scores(query).tolist(), k)


def _turns_of(pages: Sequence[Page]) -> list[Turn]:
    """Turn records rebuilt from pages' text (one ``who: text`` line per turn), for callers that
    have no turns at hand; turns outside ``pages`` are left empty."""
    found: dict[int, Turn] = {}
    for p in pages:
        for j, line in enumerate(p.text.splitlines()):
            who, sep, text = line.partition(": ")
            if not sep:
                who, text = "user", line
            index = p.first_turn + j
            role = who if who in ROLES else "user"
            found[index] = Turn(role, text, index, speaker=None if who in ROLES else who)
    last = max(found, default=-1)
    return [found.get(i) or Turn("user", "", i) for i in range(last + 1)]


class Rerank:
    """The product's ranking (``localpager.retrieval.ranking``): a page scores as its best turn, each turn by its
    embedding similarity to the question fused with its BM25 score.

    A whole-page embedding blurs one fact among twenty turns of small talk (the best single turn found
    the evidence page first 78% of the time against 46% for whole pages); the lexical half finds the
    questions that reuse the conversation's own words and names. The embedder caches vectors by text,
    so each turn is embedded once however many probes and grid cells see it.
    """

    name = RetrieverName.RERANK
    uses_turns = True  # retrieve_pages passes the conversation's turns

    def __init__(self, embedder: Embedder | None = None, settings: HybridSettings | None = None):
        self._embedder = embedder
        self.settings = settings or HybridSettings()
        self._lexical: dict[str, LexicalIndex] = {}

    @property
    def embedder(self) -> Embedder:
        """The shared default embedder unless one was given; torch loads on the first encode."""
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    def retrieve(self, question: str, pages: Sequence[Page], k: int, *,
                 turns: Sequence[Turn] | None = None, key: str | None = None) -> list[int]:
        """``turns``: the conversation so far (indexed by turn number) and ``key`` its identity, for
        the BM25 cache; without them the turns are read back from the pages' text."""
        if turns is None:
            turns = _turns_of(pages)
            key = f"pages-{hash(tuple(p.text for p in pages))}"
        key = key or ""
        if key not in self._lexical:
            if len(self._lexical) >= 16:
                self._lexical.clear()
            self._lexical[key] = LexicalIndex(key)
        hits = rank_pages(question, turns, pages, embedding_scorer(self.embedder, turns),
                          self._lexical[key], self.settings)
        return [h.page_id for h in hits[:k]]


class Dense(Rerank):
    """The embedding half of ``rerank`` alone, for comparison (``lab.fusion``'s ``dense`` baseline): cosine to
    ``turn.text`` as the product's index embeds it (this simulator's rerank used to embed the rendered
    ``who: text`` lines)."""

    name = RetrieverName.DENSE

    def __init__(self, embedder: Embedder | None = None):
        super().__init__(embedder, FusionSettings(fusion=Fusion.DENSE))


class Oracle:
    """The pages holding the probe's evidence, in evidence order: the ceiling for any retriever.

    It needs the evidence turns, which only an evaluation has, so they come as a keyword argument
    (use ``retrieve_pages`` to call any retriever uniformly); calling it without them is an error
    rather than a silent empty answer.
    """

    name = RetrieverName.ORACLE

    def retrieve(
        self, question: str, pages: Sequence[Page], k: int, *, evidence: Sequence[int] | None = None
    ) -> list[int]:
        if evidence is None:
            raise ValueError("the oracle retriever needs the probe's evidence turns (evidence=...)")
        chosen = [p.page_id for turn in evidence for p in pages if p.holds(turn)]
        return list(dict.fromkeys(chosen))[:k]


def retrieve_pages(
    retriever: Retriever, question: str, pages: Sequence[Page], k: int, evidence: Sequence[int],
    turns: Sequence[Turn] | None = None, key: str | None = None,
) -> list[int]:
    """Run ``retriever`` for a probe whose evidence is known, giving the oracle what it needs and the
    turn-level rankers the conversation's turns (``key``: the conversation's id)."""
    if isinstance(retriever, Oracle):
        return retriever.retrieve(question, pages, k, evidence=evidence)
    if getattr(retriever, "uses_turns", False) and turns is not None:
        return retriever.retrieve(question, pages, k, turns=turns, key=key)
    return retriever.retrieve(question, pages, k)


RETRIEVERS: dict[RetrieverName, Callable[[], Retriever]] = {
    RetrieverName.OVERLAP: Overlap,
    RetrieverName.BM25: BM25,
    RetrieverName.RERANK: Rerank,
    RetrieverName.DENSE: Dense,
    RetrieverName.ORACLE: Oracle,
}


def get_retriever(name: str) -> Retriever:
    """A fresh retriever called ``name`` (a ``RetrieverName``); ValueError naming the known ones otherwise."""
    return RETRIEVERS[choose(RetrieverName, name, "retriever")]()
