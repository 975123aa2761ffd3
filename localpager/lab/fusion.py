"""The ranking's variants: what ``benchmarks/retrieval_fusion.py`` measured the product's ranking against.

The product's ranking (``retrieval.ranking``) runs one choice: a weighted fusion of the min-max cosine and the
question-normalised BM25 share raised to a power, BM25's idf counted over the whole conversation. The others stay
here, in the lab, so that the choice can be measured again (the benchmark's grid, the simulator's ``dense``
retriever, the tests that pin each variant): other fusions (reciprocal rank fusion), other normalisations, one
signal alone (the baselines), and BM25's idf counted over the candidates only.

They plug into the product's ranking through what it already takes: its settings (``FusionSettings`` is a
``HybridSettings`` whose ``fuse`` is this module's) and its lexical index (``CandidatesIndex`` overrides
``LexicalIndex.candidate_scores``), so a variant is ranked by the product's own ``rank_turns``.
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from ..core.choices import choose
from ..core.records import Turn
from ..core.text import content_words
from ..retrieval.ranking import HybridSettings, LexicalIndex, minmax


class Fusion(StrEnum):
    """How the dense and the lexical signal are fused (``FusionSettings.fusion``)."""

    # the product's form (with the product's normalisations, the product's fusion): kept to be compared with
    # the other normalisations below
    WEIGHTED = "weighted"
    # reciprocal rank fusion, the usual hybrid-search default: lost on both tuning sets (0.42/0.65 and
    # 0.41/0.78 page top-1/top-3 held out, against 0.60/0.79 and 0.58/0.91)
    RRF = "rrf"
    DENSE = "dense"  # the embedding alone: the baseline the fusion must beat on paraphrased questions
    LEXICAL = "lexical"  # BM25 alone: the baseline the fusion must beat on questions reusing the talk's words


class DenseNorm(StrEnum):
    """How the cosines are normalised over the candidates before a weighted fusion (the product: ``minmax``)."""

    RAW = "raw"
    MINMAX = "minmax"
    Z = "z"


class LexicalNorm(StrEnum):
    """How the BM25 scores are normalised before a weighted fusion (``query``, the product's: the share of the
    question's weight matched)."""

    QUERY = "query"
    MAX = "max"
    MINMAX = "minmax"
    Z = "z"


class IdfScope(StrEnum):
    """Which turns BM25's idf counts (``lexical_index``)."""

    CONVERSATION = "conversation"  # every turn so far: the product's (``LexicalIndex``)
    CANDIDATES = "candidates"  # only the turns being ranked (``CandidatesIndex``)


@dataclass
class FusionSettings(HybridSettings):
    """The product's settings with the fusion a variant: ``weighted`` (dense_weight * dense + (1 - dense_weight)
    * lexical ** lexical_power, each normalised over the candidates first as ``dense_norm`` and ``lexical_norm``
    say; ``raw``/``query`` leave them as they are: the cosine, and the share of the question's BM25 weight
    matched), ``rrf`` (reciprocal rank fusion with the same weights and ``rrf_k``), or one signal alone
    (``dense``, ``lexical``: a baseline, so the priors on what holds an answer do not apply: their weights are
    0). The defaults are the product's: ``FusionSettings()`` ranks as ``HybridSettings()``."""

    fusion: Fusion = Fusion.WEIGHTED
    dense_norm: DenseNorm = DenseNorm.MINMAX
    lexical_norm: LexicalNorm = LexicalNorm.QUERY
    rrf_k: float = 60.0

    def __post_init__(self) -> None:
        self.fusion = choose(Fusion, self.fusion, "fusion")
        self.dense_norm = choose(DenseNorm, self.dense_norm, "dense_norm")
        self.lexical_norm = choose(LexicalNorm, self.lexical_norm, "lexical_norm")
        if self.lexical_power != 1.0 and (self.lexical_power <= 0 or self.lexical_norm == "z"):
            raise ValueError("lexical_power must be positive and needs a 0..1 lexical_norm (not z)")
        super().__post_init__()
        if self.fusion in (Fusion.DENSE, Fusion.LEXICAL):
            self.telling_weight = self.answer_type_weight = self.speaker_weight = 0.0

    def fuse(self, dense: np.ndarray, lexical: np.ndarray) -> np.ndarray:
        return fused_scores(dense, lexical, self)


def fusion_settings(fusion: str = Fusion.WEIGHTED, dense_weight: float = HybridSettings.dense_weight,
            dense_norm: str = DenseNorm.MINMAX, lexical_norm: str = LexicalNorm.QUERY,
            lexical_power: float = HybridSettings.lexical_power, rrf_k: float = 60.0, **settings) -> FusionSettings:
    """``FusionSettings`` by position in the order the benchmark's grid names them (fusion, dense weight, the
    two normalisations, the power); ``settings``: any other field."""
    return FusionSettings(fusion=fusion, dense_weight=dense_weight, dense_norm=dense_norm, lexical_norm=lexical_norm,
                          lexical_power=lexical_power, rrf_k=rrf_k, **settings)


def _normalise(x: np.ndarray, how: str) -> np.ndarray:
    if how in ("raw", "query") or x.size == 0:
        return x
    if how == "max":
        top = x.max()
        return x / top if top > 0 else x
    if how == "minmax":
        return minmax(x)
    std = x.std()  # z
    return (x - x.mean()) / std if std > 0 else np.zeros_like(x)


def _ranks(x: np.ndarray) -> np.ndarray:
    """1 for the best; ties in candidate order."""
    order = np.argsort(-x, kind="stable")
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.arange(1, len(x) + 1)
    return ranks


def fused_scores(dense: np.ndarray, lexical: np.ndarray, settings: FusionSettings) -> np.ndarray:
    """Fused score of each candidate turn from its cosine and its normalised BM25 score, as ``settings`` says
    (for the product's choice, the same figures as ``HybridSettings.fuse``)."""
    dense, lexical = np.asarray(dense, dtype=np.float64), np.asarray(lexical, dtype=np.float64)
    w = settings.dense_weight
    if settings.fusion == Fusion.DENSE:
        return dense
    if settings.fusion == Fusion.LEXICAL:
        return lexical
    if settings.fusion == Fusion.RRF:
        # a turn sharing no word with the question gets no lexical vote rather than a low rank
        lexical_part = np.where(lexical > 0, 1.0 / (settings.rrf_k + _ranks(lexical)), 0.0)
        return w / (settings.rrf_k + _ranks(dense)) + (1 - w) * lexical_part
    lexical = _normalise(lexical, settings.lexical_norm)
    if settings.lexical_power != 1.0:
        lexical = np.power(np.clip(lexical, 0.0, None), settings.lexical_power)
    return w * _normalise(dense, settings.dense_norm) + (1 - w) * lexical


# -- BM25 with its idf over the candidates ------------------------------------------------------------
class Bm25:
    """A bm25s index over some documents, with the document frequencies its idf comes from: the candidates'
    index (``CandidatesIndex``), and the reference the product's appended index is checked against (it must
    score as bm25s does over the same turns)."""

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


class CandidatesIndex(LexicalIndex):
    """BM25 whose idf counts only the turns being ranked, not the whole conversation: a bm25s index per
    candidate set, cached by (conversation key, number of turns, candidates), ``cache`` of them. It exists to
    show that the product's scope is as good (BM25 alone, LoCoMo 1-5: within 0.01) while being the one that can
    be appended to and saved. The turn table (``LexicalIndex.table``) is still the conversation's."""

    def __init__(self, key: str = "", *, cache: int = 8, **options):
        super().__init__(key, **options)
        self._cache_size = cache
        self._built: OrderedDict[tuple, Bm25] = OrderedDict()

    def warm(self) -> None:
        """Nothing to index ahead: each candidate set gets its own index when it is ranked."""

    def _index(self, candidates: tuple[int, ...]) -> tuple[Bm25, dict[int, int]]:
        """The bm25s index of ``candidates``, and each turn's row in it."""
        key = (self.key, len(self._turns), candidates)
        built = self._built.get(key)
        if built is None:
            built = Bm25([self.document(self._turns[i]) for i in candidates], self.k1, self.b)
            self._built[key] = built
            while len(self._built) > self._cache_size:
                self._built.popitem(last=False)
        else:
            self._built.move_to_end(key)
        return built, {turn: row for row, turn in enumerate(candidates)}

    def scores(self, question: str, turn_indices: Sequence[int],
               turns: Sequence[Turn] | None = None) -> dict[int, float]:
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

    def candidate_scores(self, question: str, turns: Sequence[Turn], candidates: np.ndarray) -> np.ndarray:
        lx = self.scores(question, candidates.tolist(), turns)
        return np.array([lx.get(i, 0.0) for i in candidates.tolist()], dtype=np.float64)


def lexical_index(key: str = "", *, idf: str = IdfScope.CONVERSATION, **options) -> LexicalIndex:
    """A lexical index with its idf over ``idf``: the product's (``conversation``) or ``candidates``;
    ``options``: ``LexicalIndex``'s (stemmer, speakers, ...)."""
    if choose(IdfScope, idf, "idf scope") == IdfScope.CANDIDATES:
        return CandidatesIndex(key, **options)
    return LexicalIndex(key, **options)
