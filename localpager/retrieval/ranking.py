"""Turn-level retrieval for recall: dense similarity fused with BM25 over a conversation's turns.

This is the one ranking the product's reranker and the paging simulator share, so a simulator number
is a product number. Neither signal wins alone: questions that paraphrase a fact (generated probes avoid
its words) are found by the embedding, questions that reuse the conversation's words and names (LoCoMo)
by BM25. ``benchmarks/retrieval_fusion.py`` measures the variants; the defaults below are its choice.

A page scores as its best fused turn: one fact among twenty turns of small talk is blurred by any
page-level average.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from ..core.answer_types import asked_types
from ..core.answer_types import match as type_match
from ..core.dates import date_terms
from ..core.records import Page, Turn
from ..core.choices import Stemmer, choose
from ..core.text import asks_nothing, content_words, is_question

# dense(question, turn_indices) -> {turn index: cosine similarity of the question to that turn's text}
DenseScorer = Callable[[str, list[int]], dict[int, float]]



class Fusion(StrEnum):
    """How the dense and the lexical signal are fused (``HybridSettings``)."""

    WEIGHTED = "weighted"
    RRF = "rrf"  # reciprocal rank fusion
    DENSE = "dense"  # the embedding alone (a baseline)
    LEXICAL = "lexical"  # BM25 alone (a baseline)


class DenseNorm(StrEnum):
    """How the cosines are normalised over the candidates before fusing."""

    RAW = "raw"
    MINMAX = "minmax"
    Z = "z"


class LexicalNorm(StrEnum):
    """How the BM25 scores are normalised before fusing (``query``: the share of the question's weight matched)."""

    QUERY = "query"
    MAX = "max"
    MINMAX = "minmax"
    Z = "z"


class IdfScope(StrEnum):
    """Which turns BM25's idf counts (``LexicalIndex``)."""

    CONVERSATION = "conversation"  # every turn so far
    CANDIDATES = "candidates"  # only the turns being ranked


@dataclass
class TurnHit:
    """One candidate turn: ``score`` is the fused score, ``dense`` the cosine similarity, ``lexical``
    the BM25 score as a share of the most the question's words could score (0..1)."""

    turn: int
    page_id: int
    score: float
    dense: float
    lexical: float


@dataclass
class HybridSettings:
    """How the two signals are fused, and when a message pages in without the model asking.

    ``weighted``: dense_weight * dense + (1 - dense_weight) * lexical ** lexical_power, each normalised
    over the candidates first (``raw``/``query`` leave them as they are: the cosine, and the share of
    the question's BM25 weight matched). ``rrf``: reciprocal rank fusion with the same weights.
    ``dense``/``lexical``: one signal alone (baselines).

    Defaults: the best of 12 lexical variants x 147 fusions (and 198 with a power) on the tuning sets of
    ``benchmarks/retrieval_fusion.py`` (page top-1/top-3, fixed_20, all but the newest page evicted).
    Held out, against dense alone and BM25 alone (question turns scaled in all three): LoCoMo conversations
    6-10, 0.60/0.79 (dense 0.29/0.52, BM25 0.60/0.80); generated seeds 100 and 200, 0.58/0.91 (dense
    0.60/0.90, BM25 0.16/0.40). The
    lexical share is strong (0.2-0.5) when a question reuses the conversation's words and near 0.1 when
    it paraphrases; the power damps those weak matches so that the dense tenth decides between them.
    Plain RRF (k=60, equal weights) lost on both: 0.42/0.65 and 0.41/0.78. Fused scores are relative to
    the candidates (min-max dense): compare them within one question, not with a fixed cosine.
    """

    fusion: Fusion = Fusion.WEIGHTED
    dense_weight: float = 0.1
    dense_norm: DenseNorm = DenseNorm.MINMAX
    lexical_norm: LexicalNorm = LexicalNorm.QUERY
    lexical_power: float = 1.5  # > 1 damps weak lexical matches (a shared generic word) more than strong ones
    rrf_k: float = 60.0
    # The recall trigger (``should_recall``): a question pages in when its best fused score reaches
    # ``question_threshold``, any other message when it reaches ``statement_threshold`` (None: never),
    # and only when the best page leads the second by ``min_margin``. Measured: no similarity rule told
    # probes from small talk on the generated set (its small talk is 95% questions and repeats filler
    # it already said), while on LoCoMo the question form alone paged in every probe and 27% of small
    # talk (any best-cosine threshold that keeps the probes pages in 99-100% of it).
    question_threshold: float = 0.0
    statement_threshold: float | None = None
    min_margin: float = 0.0
    # A turn that is itself a question asks rather than tells: its fused score is scaled by this.
    # benchmarks/retrieval_fusion.py, page top-1 on the tuning sets: generated 0.54 -> 0.61, LoCoMo
    # 0.60 -> 0.62 (0.6: 0.64 and 0.60; 0.4: 0.64 and 0.59); held out 0.55 -> 0.58 and 0.59 -> 0.60.
    question_turn_weight: float = 0.8
    # Priors on what holds an answer, each a factor (1 + weight) on the fused score: a turn in which a person
    # tells something and asks nothing (``telling``); a turn stating a fact of the type the question asks for
    # (``answer_types.match``: an amount for "how much", a name for "who", something to avoid for "what must
    # I never eat"; graded by the share of asked types); a turn by a speaker the question names ("When did
    # Caroline …"). Chosen on the tuning sets (benchmarks/recall_gate.py, page top-1, all but the newest page
    # evicted; generated / LoCoMo 1-5): none 0.71 / 0.63; these 0.93 / 0.67. The dense weight stayed 0.1:
    # 0.15 gave 0.93 / 0.66, 0.2 0.94 / 0.54.
    telling_weight: float = 0.15
    answer_type_weight: float = 1.0
    speaker_weight: float = 1.0

    def __post_init__(self) -> None:
        self.fusion = choose(Fusion, self.fusion, "fusion")
        self.dense_norm = choose(DenseNorm, self.dense_norm, "dense_norm")
        self.lexical_norm = choose(LexicalNorm, self.lexical_norm, "lexical_norm")
        if not 0.0 <= self.dense_weight <= 1.0:
            raise ValueError(f"dense_weight must be within 0..1, got {self.dense_weight}")
        if self.lexical_power != 1.0 and (self.lexical_power <= 0 or self.lexical_norm == "z"):
            raise ValueError("lexical_power must be positive and needs a 0..1 lexical_norm (not z)")


# -- lexical ----------------------------------------------------------------------------------------
class _Bm25:
    """A bm25s index over some documents, with the document frequencies its idf comes from."""

    def __init__(self, docs: list[tuple[str, ...]], k1: float, b: float):
        import bm25s  # imported on first use: the CLI starts without it

        self.n = len(docs)
        self.df = Counter(t for doc in docs for t in set(doc))
        self.index = None
        if self.df:  # bm25s cannot index a corpus without a single term
            self.index = bm25s.BM25(k1=k1, b=b, method="lucene")
            self.index.index([list(doc) for doc in docs], show_progress=False)

    def idf(self, term: str) -> float:
        """Lucene's idf (what bm25s uses); a term the documents never use gets the largest."""
        df = self.df.get(term, 0)
        return math.log(1 + (self.n - df + 0.5) / (df + 0.5))

    def scores(self, query: Sequence[str]) -> np.ndarray:
        known = [t for t in query if t in self.df]
        if self.index is None or not known:
            return np.zeros(self.n, dtype=np.float32)
        return np.asarray(self.index.get_scores(known), dtype=np.float32)


class LexicalIndex:
    """BM25 (bm25s, Lucene variant) over one conversation's turns.

    Built lazily and cached by (conversation key, number of turns): a growing conversation is
    re-indexed only when a turn was added since the last question. ``scores`` are divided by the most
    the question's distinct terms could score (the sum of their idf: Lucene's BM25 term score tends to
    idf as the term repeats), so 1.0 means every word of the question matched strongly and scores are
    comparable across questions; a word the conversation never used counts in that sum, so a question
    about something new scores low.

    ``speakers``: a turn's document starts with its speaker's name (LoCoMo questions name who did what).
    ``idf``: ``conversation`` (every turn so far) or ``candidates`` (only the turns being ranked).
    Measured (BM25 alone, LoCoMo 1-5 top-1): no stemming 0.56, plurals 0.56, ``light`` 0.59, ``light``
    with speaker names 0.63; the idf scope changed nothing beyond 0.01, so the cacheable one is default.
    """

    def __init__(self, key: str = "", *, stemmer: str = Stemmer.LIGHT, speakers: bool = True,
                 idf: str = IdfScope.CONVERSATION, k1: float = 1.5, b: float = 0.75, cache: int = 8):
        stemmer, idf = choose(Stemmer, stemmer, "stemmer"), choose(IdfScope, idf, "idf scope")
        self.key, self.stemmer, self.speakers, self.idf_scope = key, stemmer, speakers, idf
        self.k1, self.b, self._cache_size = k1, b, cache
        self._turns: Sequence[Turn] = ()
        self._built: OrderedDict[tuple, _Bm25] = OrderedDict()
        self._lock = threading.Lock()

    def document(self, turn: Turn) -> tuple[str, ...]:
        """The terms a turn is indexed under: its words, its speaker's name and the dates its relative
        time expressions resolve to ("yesterday" said on 8 May 2023 is also "7 May 2023")."""
        text = f"{turn.speaker} {turn.text}" if self.speakers and turn.speaker else turn.text
        dated = date_terms(turn.text, turn.time)
        return content_words(f"{text} {dated}" if dated else text, self.stemmer)

    def update(self, turns: Sequence[Turn]) -> None:
        """The conversation's turns so far; nothing is rebuilt until a question needs it."""
        with self._lock:
            self._turns = turns

    def _index(self, candidates: tuple[int, ...]) -> tuple[_Bm25, dict[int, int]]:
        """The index to score ``candidates`` with, and each turn's row in it."""
        n = len(self._turns)
        rows = candidates if self.idf_scope == "candidates" else tuple(range(n))
        key = (self.key, n, candidates if self.idf_scope == "candidates" else None)
        built = self._built.get(key)
        if built is None:
            built = _Bm25([self.document(self._turns[i]) for i in rows], self.k1, self.b)
            self._built[key] = built
            while len(self._built) > self._cache_size:
                self._built.popitem(last=False)
        else:
            self._built.move_to_end(key)
        return built, {turn: row for row, turn in enumerate(rows)}

    def scores(self, question: str, turn_indices: Sequence[int],
               turns: Sequence[Turn] | None = None) -> dict[int, float]:
        """Each turn's BM25 score for ``question`` over the most it could score (0..1).

        ``turns`` (optional) updates the conversation first, under the same lock."""
        with self._lock:
            if turns is not None:
                self._turns = turns
            candidates = tuple(turn_indices)
            if not candidates:
                return {}
            index, row = self._index(candidates)
            query = list(dict.fromkeys(content_words(question, self.stemmer)))
            weight = sum(index.idf(t) for t in query)
            if weight <= 0:
                return dict.fromkeys(candidates, 0.0)
            raw = index.scores(query)
            return {i: float(raw[row[i]]) / weight for i in candidates}


# -- fusion -----------------------------------------------------------------------------------------
def _normalise(x: np.ndarray, how: str) -> np.ndarray:
    if how in ("raw", "query") or x.size == 0:
        return x
    if how == "max":
        top = x.max()
        return x / top if top > 0 else x
    if how == "minmax":
        span = x.max() - x.min()
        return (x - x.min()) / span if span > 0 else np.zeros_like(x)
    std = x.std()  # z
    return (x - x.mean()) / std if std > 0 else np.zeros_like(x)


def _ranks(x: np.ndarray) -> np.ndarray:
    """1 for the best; ties in candidate order."""
    order = np.argsort(-x, kind="stable")
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.arange(1, len(x) + 1)
    return ranks


def fused_scores(dense: np.ndarray, lexical: np.ndarray, settings: HybridSettings) -> np.ndarray:
    """Fused score of each candidate turn from its cosine and its normalised BM25 score."""
    dense, lexical = np.asarray(dense, dtype=np.float64), np.asarray(lexical, dtype=np.float64)
    w = settings.dense_weight
    if settings.fusion == "dense":
        return dense
    if settings.fusion == "lexical":
        return lexical
    if settings.fusion == "rrf":
        # a turn sharing no word with the question gets no lexical vote rather than a low rank
        lexical_part = np.where(lexical > 0, 1.0 / (settings.rrf_k + _ranks(lexical)), 0.0)
        return w / (settings.rrf_k + _ranks(dense)) + (1 - w) * lexical_part
    lexical = _normalise(lexical, settings.lexical_norm)
    if settings.lexical_power != 1.0:
        lexical = np.power(np.clip(lexical, 0.0, None), settings.lexical_power)
    return w * _normalise(dense, settings.dense_norm) + (1 - w) * lexical


def rank_turns(question: str, turns: Sequence[Turn], pages: Sequence[Page], dense: DenseScorer,
               lexical: LexicalIndex, settings: HybridSettings | None = None) -> list[TurnHit]:
    """Every turn of ``pages``, best fused score first (ties: earlier turn first)."""
    settings = settings or HybridSettings()
    owner = {i: p.page_id for p in pages for i in p.turn_range if i < len(turns) and turns[i].text}  # not forgotten
    candidates = sorted(owner)
    if not candidates:
        return []
    d = dense(question, candidates) if settings.fusion != "lexical" else {}
    lx = lexical.scores(question, candidates, turns) if settings.fusion != "dense" else {}
    dv = np.array([d.get(i, 0.0) for i in candidates])
    lv = np.array([lx.get(i, 0.0) for i in candidates])
    fused = (fused_scores(dv, lv, settings) * question_turn_weights(turns, candidates, settings)
             * answer_priors(question, turns, candidates, settings))
    order = sorted(range(len(candidates)), key=lambda j: (-fused[j], candidates[j]))
    return [TurnHit(candidates[j], owner[candidates[j]], float(fused[j]), float(dv[j]), float(lv[j]))
            for j in order]


def answer_priors(question: str, turns: Sequence[Turn], indices: Sequence[int], settings: HybridSettings) -> np.ndarray:
    """The factor of each candidate turn from the priors on what holds an answer (see ``HybridSettings``);
    none for the one-signal baselines (``dense``, ``lexical``)."""
    factors = np.ones(len(indices))
    if settings.fusion in ("dense", "lexical"):
        return factors
    if settings.telling_weight:
        factors *= np.array([1 + settings.telling_weight if tells(turns[i]) else 1.0 for i in indices])
    if settings.answer_type_weight and asked_types(question):
        factors *= np.array([1 + settings.answer_type_weight * type_match(question, turns[i].text) for i in indices])
    if settings.speaker_weight:
        named = question.lower()
        factors *= np.array([1 + settings.speaker_weight if turns[i].speaker and turns[i].speaker.lower() in named
                             else 1.0 for i in indices])
    return factors


def tells(turn: Turn) -> bool:
    """A turn in which a person tells something and asks nothing: the user's, or a named speaker's, with no
    sentence in question form. (An assistant's turns tell the user things, not facts about the user.)"""
    return (turn.role == "user" or bool(turn.speaker)) and asks_nothing(turn.text)


def question_turn_weights(turns: Sequence[Turn], indices: Sequence[int], settings: HybridSettings) -> np.ndarray:
    """``question_turn_weight`` for turns that are questions, 1 for the others."""
    if settings.question_turn_weight == 1.0:
        return np.ones(len(indices))
    return np.array([settings.question_turn_weight if is_question(turns[i].text) else 1.0 for i in indices])


def best_per_page(hits: Sequence[TurnHit]) -> list[TurnHit]:
    """Each page's first (best) hit, in the order of ``hits``."""
    seen: dict[int, TurnHit] = {}
    for h in hits:
        seen.setdefault(h.page_id, h)
    return list(seen.values())


def rank_pages(question: str, turns: Sequence[Turn], pages: Sequence[Page], dense: DenseScorer,
               lexical: LexicalIndex, settings: HybridSettings | None = None) -> list[TurnHit]:
    """Each page's best turn, best page first: a page scores as its best fused turn."""
    return best_per_page(rank_turns(question, turns, pages, dense, lexical, settings))


def embedding_scorer(embedder, turns: Sequence[Turn]) -> DenseScorer:
    """A DenseScorer that embeds ``turn.text`` directly (the embedder caches vectors by text)."""

    def score(question: str, turn_indices: list[int]) -> dict[int, float]:
        if not turn_indices:
            return {}
        vectors = embedder.encode([question, *(turns[i].text for i in turn_indices)])
        return dict(zip(turn_indices, (vectors[1:] @ vectors[0]).tolist()))

    return score


# -- recall trigger ---------------------------------------------------------------------------------
@dataclass
class TriggerFeatures:
    """What a recall trigger can see of a message before the model runs."""

    score: float  # best fused score
    margin: float  # best fused score minus the best fused score of another page (score if one page)
    dense: float  # best cosine of any candidate turn
    lexical: float  # best normalised BM25 score of any candidate turn
    question: bool
    pages: int  # pages ranked


def trigger_features(message: str, hits: Sequence[TurnHit]) -> TriggerFeatures:
    """Features of ``message`` from ``rank_turns``'s hits (``rank_pages``'s give the same score and
    margin, with dense and lexical maxima over the pages' best turns only)."""
    question = is_question(message)
    if not hits:
        return TriggerFeatures(0.0, 0.0, 0.0, 0.0, question, 0)
    pages = best_per_page(hits)
    second = pages[1].score if len(pages) > 1 else 0.0
    return TriggerFeatures(pages[0].score, pages[0].score - second, max(h.dense for h in hits),
                           max(h.lexical for h in hits), question, len(pages))


def should_recall(features: TriggerFeatures, settings: HybridSettings | None = None) -> bool:
    """Page in without the model asking: see ``HybridSettings`` for the rule."""
    s = settings or HybridSettings()
    if features.pages == 0 or features.margin < s.min_margin:
        return False
    threshold = s.question_threshold if features.question else s.statement_threshold
    return threshold is not None and features.score >= threshold
