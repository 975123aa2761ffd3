"""Turn-level retrieval for recall: dense similarity fused with BM25 over a conversation's turns.

This is the one ranking the product's reranker and the paging simulator share, so a simulator number
is a product number. Neither signal wins alone: questions that paraphrase a fact (generated probes avoid
its words) are found by the embedding, questions that reuse the conversation's words and names (LoCoMo)
by BM25. ``benchmarks/retrieval_fusion.py`` measures the variants (``lab.fusion``: other fusions and
normalisations, one signal alone, BM25's idf over the candidates only); what is here is its choice, the one
the product runs. The lab plugs its variants in through ``HybridSettings.fuse`` and
``LexicalIndex.candidate_scores``.

A page scores as its best fused turn: one fact among twenty turns of small talk is blurred by any
page-level average.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.answer_types import TYPES, asked_groups, asked_types, stated_types
from ..core.answer_types import match as type_match
from ..core.dates import date_terms
from ..core.records import Page, Turn
from ..core.choices import Stemmer, choose
from ..core.text import asks_nothing, content_words, is_question, term_key

# dense(question, turn_indices) -> {turn index: cosine similarity of the question to that turn's text}
DenseScorer = Callable[[str, list[int]], dict[int, float]]
TYPE_BITS = {t: i for i, t in enumerate(TYPES)}


# a capitalised word that does not begin a sentence: a name (the gate's ``known_name``, the turn table's names)
CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][\w'’-]*[a-z][\w'’-]*")


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
    """How the two signals are fused, and the priors on what holds an answer.

    ``fuse``: dense_weight * dense + (1 - dense_weight) * lexical ** lexical_power, the cosines normalised
    min-max over the candidates first, the lexical score the share of the question's BM25 weight matched.

    Defaults: the best of 12 lexical variants x 147 fusions (and 198 with a power) on the tuning sets of
    ``benchmarks/retrieval_fusion.py`` (page top-1/top-3, fixed_20, all but the newest page evicted).
    Held out, against dense alone and BM25 alone (question turns scaled in all three): LoCoMo conversations
    6-10, 0.60/0.79 (dense 0.29/0.52, BM25 0.60/0.80); generated seeds 100 and 200, 0.58/0.91 (dense
    0.60/0.90, BM25 0.16/0.40). The
    lexical share is strong (0.2-0.5) when a question reuses the conversation's words and near 0.1 when
    it paraphrases; the power damps those weak matches so that the dense tenth decides between them.
    Plain RRF (k=60, equal weights) lost on both: 0.42/0.65 and 0.41/0.78 (the variants: ``lab.fusion``).
    Fused scores are relative to the candidates (min-max dense): compare them within one question, not with a
    fixed cosine.
    """

    dense_weight: float = 0.1
    lexical_power: float = 1.5  # > 1 damps weak lexical matches (a shared generic word) more than strong ones
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
        if not 0.0 <= self.dense_weight <= 1.0:
            raise ValueError(f"dense_weight must be within 0..1, got {self.dense_weight}")
        if self.lexical_power <= 0:
            raise ValueError(f"lexical_power must be positive, got {self.lexical_power}")

    def fuse(self, dense: np.ndarray, lexical: np.ndarray) -> np.ndarray:
        """The fused score of each candidate turn from its cosine and its BM25 share (what ``rank_turns``
        calls: the lab's variants, ``lab.fusion.FusionSettings``, override it)."""
        dense, lexical = np.asarray(dense, dtype=np.float64), np.asarray(lexical, dtype=np.float64)
        if self.lexical_power != 1.0:
            lexical = np.power(np.clip(lexical, 0.0, None), self.lexical_power)
        return self.dense_weight * minmax(dense) + (1 - self.dense_weight) * lexical


def minmax(x: np.ndarray) -> np.ndarray:
    """``x`` scaled to 0..1 over its own range (all 0 when it has none)."""
    if x.size == 0:
        return x
    span = x.max() - x.min()
    return (x - x.min()) / span if span > 0 else np.zeros_like(x)


# -- lexical ----------------------------------------------------------------------------------------
class _Appendable:
    """BM25 (Lucene variant) over a list of documents that only grows: postings are appended, and each
    question's scores are computed from the document frequencies, count and average length as they are
    then, as bm25s computes them (float32 term scores from float64 term-frequency parts, summed in float32
    in the query's order), so appending a turn costs that turn and a question the postings of its terms."""

    def __init__(self, k1: float, b: float):
        self.k1, self.b = k1, b
        self.n, self.total_length = 0, 0
        self.df: Counter = Counter()
        self._lengths: list[int] = []
        self._postings: dict[str, tuple[list[int], list[int]]] = {}  # term -> (rows, term frequencies)
        self._arrays: dict[str, tuple[int, np.ndarray, np.ndarray]] = {}  # term -> (size, rows, tfs)
        self._length_array = np.zeros(0, dtype=np.float64)

    def add(self, doc: tuple[str, ...]) -> None:
        row = self.n
        for term, tf in Counter(doc).items():
            rows, tfs = self._postings.setdefault(term, ([], []))
            rows.append(row)
            tfs.append(tf)
            self.df[term] += 1
        self._lengths.append(len(doc))
        self.total_length += len(doc)
        self.n += 1

    def idf(self, term: str) -> float:
        """Lucene's idf (what bm25s uses); a term the documents never use gets the largest."""
        df = self.df.get(term, 0)
        return math.log(1 + (self.n - df + 0.5) / (df + 0.5))

    def _posting(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        rows, tfs = self._postings[term]
        cached = self._arrays.get(term)
        if cached is None or cached[0] != len(rows):
            cached = (len(rows), np.array(rows, dtype=np.int64), np.array(tfs, dtype=np.float32))
            self._arrays[term] = cached
        return cached[1], cached[2]

    def lengths(self) -> np.ndarray:
        if len(self._length_array) != self.n:
            self._length_array = np.array(self._lengths, dtype=np.float64)
        return self._length_array

    def scores(self, query: Sequence[str]) -> np.ndarray:
        """Every document's score for the distinct terms of ``query`` (0 where none occurs)."""
        out = np.zeros(self.n, dtype=np.float32)
        known = [t for t in query if t in self.df]
        if not known or not self.total_length:
            return out
        lengths, l_avg = self.lengths(), np.float64(self.total_length / self.n)
        for term in known:
            rows, tfs = self._posting(term)
            tfc = tfs / (self.k1 * ((1 - self.b) + self.b * lengths[rows] / l_avg) + tfs)
            out[rows] += (np.float32(self.idf(term)) * tfc).astype(np.float32)
        return out


class TurnTable:
    """What the ranking asks of every turn that does not depend on the question, computed once per turn as
    the conversation grows (kept with its ``LexicalIndex``), as arrays: whether it has text (not forgotten),
    is a question, tells something (``tells``), which fact types it states (``answer_types.stated_types``, a
    bit each), its speaker; and which turns use each capitalised word (the gate's ``known_name``)."""

    def __init__(self) -> None:
        self.n = 0
        self._rows: dict[str, list] = {"text": [], "question": [], "tells": [], "stated": [], "speaker": []}
        self._arrays: dict[str, np.ndarray] = {}
        self.speakers: set[str] = set()  # lower case
        self.names: dict[str, list[int]] = {}  # term_key of a capitalised word -> turns using it

    def add(self, turn: Turn) -> None:

        row = self._rows
        row["text"].append(bool(turn.text))
        row["question"].append(is_question(turn.text))
        row["tells"].append(tells(turn))
        row["stated"].append(sum(1 << TYPE_BITS[t] for t in stated_types(turn.text)))
        speaker = turn.speaker.lower() if turn.speaker else ""
        row["speaker"].append(speaker)
        if speaker:
            self.speakers.add(speaker)
        for key in dict.fromkeys(term_key(w) for w in CAPITALISED.findall(turn.text)):
            self.names.setdefault(key, []).append(self.n)
        self.n += 1

    def array(self, name: str) -> np.ndarray:
        cached = self._arrays.get(name)
        if cached is None or len(cached) != self.n:
            values = self._rows[name]
            cached = np.array(values, dtype=object if name == "speaker" else None)
            if name == "stated":
                cached = cached.astype(np.int64)
            self._arrays[name] = cached
        return cached


@dataclass(frozen=True)
class LexiconFile:
    """Where a ``LexicalIndex`` is saved and read again by a new process (``lexfile``; ``path`` None: nowhere), and
    what keeps the file valid: the store's erase generation, read by ``erasures()``, staying ``generation``, the
    erase generation the turns the index will be given were read under (default: the store's now). It is saved
    only while the store's is still that one (checked under the store's lock as it is written)."""

    path: Path | None = None
    erasures: Callable[[], int] | None = None
    generation: int | None = None


class LexicalIndex:
    """BM25 (Lucene variant, as bm25s computes it) over one conversation's turns, its idf over every turn so far.

    The index is appended to as the conversation grows: a new turn is indexed once, never the whole
    conversation again (it was rebuilt whenever the turn count changed: seconds a question at 100,000 turns);
    scores equal bm25s's over the same turns. ``scores`` are divided by the most the question's distinct terms
    could score (the sum of their idf: Lucene's BM25 term score tends to idf as the term repeats), so 1.0 means
    every word of the question matched strongly and scores are comparable across questions; a word the
    conversation never used counts in that sum, so a question about something new scores low.

    ``speakers``: a turn's document starts with its speaker's name (LoCoMo questions name who did what).
    Measured (BM25 alone, LoCoMo 1-5 top-1): no stemming 0.56, plurals 0.56, ``light`` 0.59, ``light``
    with speaker names 0.63; an idf over the candidates only (``lab.fusion.CandidatesIndex``) changed nothing
    beyond 0.01, so the cacheable scope is the product's.
    """

    SAVE_AFTER = 2000  # turns appended since the file was read or written before it is written again
    # ... and the turns an index built from the first turn holds when it is written the first time: a conversation
    # this long is read from its file by the next process rather than tokenised again (1,000 turns: 4 ms against
    # 65-150 ms on 2 busy cores), such as the many earlier chats of a user that a new chat ranks to recall from
    SAVE_FIRST = 256

    def __init__(self, key: str = "", *, stemmer: str = Stemmer.LIGHT, speakers: bool = True,
                 k1: float = 1.5, b: float = 0.75, file: LexiconFile = LexiconFile()):
        """``file``: where the index is saved for a new process, and while it stays valid (``LexiconFile``)."""
        erasures, generation = file.erasures, file.generation
        self.file, self._erasures, self._saved = file.path, erasures, 0
        self.generation = generation if generation is not None else (erasures() if erasures else 0)
        self.key, self.stemmer, self.speakers = key, choose(Stemmer, stemmer, "stemmer"), speakers
        self.k1, self.b = k1, b
        self._turns: Sequence[Turn] = ()
        self._grown: _Appendable | None = None  # the index of the conversation's turns
        self._table: TurnTable | None = None  # the same turns' question-independent features
        self._last: tuple[int, str] | None = None  # (index, text) of the last turn appended to it
        self._lock = threading.Lock()

    def document(self, turn: Turn) -> tuple[str, ...]:
        """The terms a turn is indexed under: its words, its speaker's name and the dates its relative
        time expressions resolve to ("yesterday" said on 8 May 2023 is also "7 May 2023")."""
        text = f"{turn.speaker} {turn.text}" if self.speakers and turn.speaker else turn.text
        dated = date_terms(turn.text, turn.time)
        return content_words(f"{text} {dated}" if dated else text, self.stemmer)

    def update(self, turns: Sequence[Turn]) -> None:
        """The conversation's turns so far; nothing is indexed until a question needs it (or ``warm``)."""
        with self._lock:
            self._turns = turns

    def warm(self) -> None:
        """Index the turns given so far now (a background warm-up), not at the next question."""
        with self._lock:
            self._appended()

    def _appended(self) -> _Appendable:
        """The conversation's index, with the turns not yet in it appended; built again from the first
        turn when the turns it holds are no longer the conversation's first ones (another conversation's
        turns, or fewer turns than it holds)."""
        turns, grown, last = self._turns, self._grown, self._last
        if grown is not None and (grown.n > len(turns) or (last is not None and turns[last[0]].text != last[1])):
            grown = None
        if grown is None:
            loaded = self._read(turns)
            grown, self._table = loaded or (_Appendable(self.k1, self.b), TurnTable())
            self._grown, self._saved = grown, grown.n
        for i in range(grown.n, len(turns)):
            grown.add(self.document(turns[i]))
            self._table.add(turns[i])
        self._last = (grown.n - 1, turns[grown.n - 1].text) if grown.n else None
        if self.file is not None and grown.n - self._saved >= self._save_every():
            from . import lexfile

            lexfile.save(self.file, self._stamp(), grown, self._table, self._last[1], current=self._current)
            self._saved = grown.n  # saved, or not worth trying again before as many turns more
        return grown

    def _stamp(self) -> dict:
        """What a saved file must have been built under to be used."""
        return {"key": self.key, "stemmer": str(self.stemmer), "speakers": self.speakers, "k1": self.k1, "b": self.b,
                "erasures": self.generation}

    def _current(self) -> bool:
        """Nothing was erased since the turns it holds were read (the store's erase generation is still theirs)."""
        if self._erasures is None:
            return True
        try:
            return self._erasures() == self.generation
        except Exception:  # noqa: BLE001 - a closed store: nothing can be checked, so nothing is saved
            return False

    def _save_every(self) -> int:
        """Turns appended since the file was last read or written (none yet: since the first turn) before it is
        written (again)."""
        return self.SAVE_AFTER if self._saved else min(self.SAVE_FIRST, self.SAVE_AFTER)

    def _read(self, turns: Sequence[Turn]):
        if self.file is None or len(turns) < min(self.SAVE_FIRST, self.SAVE_AFTER):
            return None
        from . import lexfile

        return lexfile.load(self.file, self._stamp(), turns, lambda: _Appendable(self.k1, self.b), TurnTable)

    def table(self, turns: Sequence[Turn]) -> TurnTable:
        """The question-independent features of ``turns`` (the conversation so far), appended as it grows."""
        with self._lock:
            self._turns = turns
            self._appended()
            return self._table

    def score_array(self, question: str, turns: Sequence[Turn] | None = None) -> np.ndarray:
        """Every turn's score for ``question`` over the most it could score (0..1), in turn order."""
        with self._lock:
            if turns is not None:
                self._turns = turns
            return self._conversation_scores(question)

    def _conversation_scores(self, question: str) -> np.ndarray:
        index = self._appended()
        query = list(dict.fromkeys(content_words(question, self.stemmer)))
        weight = sum(index.idf(t) for t in query)
        if weight <= 0 or not index.n:
            return np.zeros(index.n, dtype=np.float64)
        return index.scores(query).astype(np.float64) / weight

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
            raw = self._conversation_scores(question)
            return {i: float(raw[i]) for i in candidates}

    def candidate_scores(self, question: str, turns: Sequence[Turn], candidates: np.ndarray) -> np.ndarray:
        """The scores of ``candidates`` (turn indices) as an array in their order: what ``rank_turns`` reads.
        The lab's idf over the candidates only (``lab.fusion.CandidatesIndex``) overrides it."""
        return self.score_array(question, turns)[candidates]


class Ranking(Sequence[TurnHit]):
    """Turns best first (``rank_turns``; ties: earlier turn first), held as arrays in turn order: a
    ``TurnHit`` is made only for the hits that are read, and the order is found for the best ``PREFIX`` first
    (a partition, then a sort of those), for all only when a reader goes past them. So a question over
    100,000 candidate turns neither sorts them all nor builds 100,000 objects to use the first few."""

    PREFIX = 1024

    def __init__(self, turns: np.ndarray, pages: np.ndarray, scores: np.ndarray, dense: np.ndarray,
                 lexical: np.ndarray):
        self.turns, self.pages, self.scores, self.dense, self.lexical = turns, pages, scores, dense, lexical
        self._order: np.ndarray | None = None  # rank order of the first len(_order) hits (all once _whole)
        self._whole = False

    def order(self, k: int | None = None) -> np.ndarray:
        """Positions (into the turn-order arrays) of at least the best ``k`` hits (None: all), best first."""
        n = len(self.turns)
        if self._order is not None and (self._whole or (k is not None and k <= len(self._order))):
            return self._order
        if k is None or k > self.PREFIX or n <= 4 * self.PREFIX:
            self._order, self._whole = np.lexsort((self.turns, -self.scores)), True
            return self._order
        kth = np.partition(-self.scores, self.PREFIX - 1)[self.PREFIX - 1]
        chosen = np.flatnonzero(-self.scores <= kth)  # every hit scoring at least the PREFIX-th, ties included
        self._order = chosen[np.lexsort((self.turns[chosen], -self.scores[chosen]))]
        return self._order

    def __len__(self) -> int:
        return len(self.turns)

    def _hit(self, j: int) -> TurnHit:
        """The hit at turn-order position ``j``."""
        return TurnHit(int(self.turns[j]), int(self.pages[j]), float(self.scores[j]), float(self.dense[j]),
                       float(self.lexical[j]))

    def __getitem__(self, j):
        if isinstance(j, slice):
            wanted = range(*j.indices(len(self)))
            order = self.order(max(wanted) + 1 if wanted else 0)
            return [self._hit(order[k]) for k in wanted]
        if j < 0:
            j += len(self)
        if not 0 <= j < len(self):
            raise IndexError(j)
        return self._hit(self.order(j + 1)[j])

    def __iter__(self):
        for start in range(0, len(self), 512):  # a slice at a time: reading the first few costs a few
            part = self.order(start + 512)[start:start + 512]
            yield from map(TurnHit, self.turns[part].tolist(), self.pages[part].tolist(), self.scores[part].tolist(),
                           self.dense[part].tolist(), self.lexical[part].tolist())

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # a sequence compared by its hits

    def __repr__(self) -> str:
        return f"Ranking({list(self)!r})"

    def best(self) -> int:
        """The turn-order position of the best hit."""
        return int(self.order(1)[0])

    def rank_of(self, turn: int) -> int | None:
        """The place of ``turn`` in the ranking (0: best), or None if it is no candidate."""
        where = np.flatnonzero(self.turns == turn)
        if not len(where):
            return None
        for k in (self.PREFIX, None):
            found = np.flatnonzero(self.order(k) == where[0])
            if len(found):
                return int(found[0])
        return None

    def best_per_page(self) -> list[TurnHit]:
        """Each page's first (best) hit, best page first."""
        order = self.order()
        _, first = np.unique(self.pages[order], return_index=True)
        return [self._hit(order[j]) for j in np.sort(first)]

    def best_pages(self, limit: int, also: Sequence[int] = ()) -> list[TurnHit]:
        """``best_per_page``'s first ``limit``, and the hits of the pages in ``also`` wherever they rank."""
        also = {int(a) for a in also}
        for k in (self.PREFIX, None):
            order = self.order(k)
            pages = self.pages[order]
            _, first = np.unique(pages, return_index=True)
            first = np.sort(first)
            found = set(pages[first].tolist())
            if self._whole or (len(first) >= limit and also <= found):
                keep = [j for n, j in enumerate(first.tolist()) if n < limit or int(pages[j]) in also]
                return [self._hit(order[j]) for j in keep]
        raise AssertionError("unreachable")


def _dense_array(dense: DenseScorer, question: str, candidates: np.ndarray) -> np.ndarray:
    """The cosines of ``candidates`` as an array (0 for a turn the scorer leaves out), from a scorer's
    ``array`` method when it has one (no dict of every candidate)."""
    fast = getattr(dense, "array", None)
    if fast is not None:
        return np.asarray(fast(question, candidates), dtype=np.float64)
    d = dense(question, candidates.tolist())
    return np.array([d.get(i, 0.0) for i in candidates.tolist()], dtype=np.float64)


def rank_turns(question: str, turns: Sequence[Turn], pages: Sequence[Page], dense: DenseScorer,
               lexical: LexicalIndex, settings: HybridSettings | None = None) -> Ranking:
    """Every turn of ``pages``, best fused score first (ties: earlier turn first).

    Per question, the work is array arithmetic over the candidates: what does not depend on the question
    (a turn's form, what it states, its BM25 postings) is kept per turn in ``lexical`` as turns arrive."""
    settings = settings or HybridSettings()
    if not turns:  # a new chat asked without storing the question: an empty table's arrays have no dtype to mask by
        return Ranking(*(np.zeros(0),) * 5)
    table = lexical.table(turns)
    owner, inside = page_owners(pages, len(turns))
    candidates = np.flatnonzero(inside & table.array("text"))  # not forgotten
    if not len(candidates):
        return Ranking(*(np.zeros(0),) * 5)
    dv = _dense_array(dense, question, candidates)
    lv = lexical.candidate_scores(question, turns, candidates)
    fused = (settings.fuse(dv, lv) * _question_weights(table, candidates, settings)
             * _priors(question, table, candidates, settings))
    keep = ~_earlier_askings(question, turns, table, candidates, fused, lexical.stemmer)
    if not keep.all():
        candidates, fused, dv, lv = candidates[keep], fused[keep], dv[keep], lv[keep]
    return Ranking(candidates, owner[candidates], fused, dv, lv)


REPEAT_CHECKS = 8  # the best-scored question turns looked at for an earlier asking of the question


def _earlier_askings(question: str, turns: Sequence[Turn], table: TurnTable, candidates: np.ndarray,
                     fused: np.ndarray, stemmer: str) -> np.ndarray:
    """Which candidates are an earlier asking of this question: a turn in question form whose words are all
    the question's. It matches the question better than any answer does and holds nothing the question does
    not, so it leaves the ranking (asked twice, "Who takes care of our parrot?" recalled its own first asking
    and answered from that). Only the best-scored few question turns are looked at: a repeat scores high."""
    out = np.zeros(len(candidates), dtype=bool)
    asking = np.flatnonzero(table.array("question")[candidates])
    if not len(asking):
        return out
    asked = set(content_words(question, stemmer))
    for i in asking[np.argsort(-fused[asking], kind="stable")[:REPEAT_CHECKS]]:
        words = content_words(turns[candidates[i]].text, stemmer)
        out[i] = bool(words) and set(words) <= asked
    return out


def page_owners(pages: Sequence[Page], n: int) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``n`` turns, the id of the page of ``pages`` holding it (a later page wins), and whether
    one does; without a Python step per turn."""
    owner, inside = np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=bool)
    if not pages or not n:
        return owner, inside
    firsts = np.fromiter((p.first_turn for p in pages), dtype=np.int64, count=len(pages))
    stops = np.minimum(np.fromiter((p.last_turn for p in pages), dtype=np.int64, count=len(pages)) + 1, n)
    ids = np.fromiter((p.page_id for p in pages), dtype=np.int64, count=len(pages))
    lengths = np.maximum(stops - firsts, 0)
    if lengths.sum() == 0:
        return owner, inside
    starts = np.cumsum(lengths) - lengths
    turns = np.arange(lengths.sum()) - np.repeat(starts - firsts, lengths)
    owner[turns] = np.repeat(ids, lengths)  # in page order: where pages overlap, the later one's id stays
    inside[turns] = True
    return owner, inside


def _question_weights(table: TurnTable, candidates: np.ndarray, settings: HybridSettings) -> np.ndarray:
    """``question_turn_weights`` from the table."""
    if settings.question_turn_weight == 1.0:
        return np.ones(len(candidates))
    return np.where(table.array("question")[candidates], settings.question_turn_weight, 1.0)


def _priors(question: str, table: TurnTable, candidates: np.ndarray, settings: HybridSettings) -> np.ndarray:
    """``answer_priors`` from the table: the same factors, multiplied in the same order."""
    factors = np.ones(len(candidates))
    if settings.telling_weight:
        factors *= np.where(table.array("tells")[candidates], 1 + settings.telling_weight, 1.0)
    groups = asked_groups(question)
    if settings.answer_type_weight and groups:
        stated = table.array("stated")[candidates]
        hits = sum(((stated & sum(1 << TYPE_BITS[t] for t in g)) != 0).astype(np.int64) for g in groups)
        factors *= 1 + settings.answer_type_weight * (hits / len(groups))
    if settings.speaker_weight:
        named = question.lower()
        speaking = {s for s in table.speakers if s in named}
        if speaking:
            mask = np.isin(table.array("speaker")[candidates], list(speaking))
            factors *= np.where(mask, 1 + settings.speaker_weight, 1.0)
    return factors


def answer_priors(question: str, turns: Sequence[Turn], indices: Sequence[int], settings: HybridSettings) -> np.ndarray:
    """The factor of each candidate turn from the priors on what holds an answer (see ``HybridSettings``)."""
    factors = np.ones(len(indices))
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
    if isinstance(hits, Ranking):
        return hits.best_per_page()
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
