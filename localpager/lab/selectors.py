"""The reranking selector's variants: what ``eval --page-choice``, ``--signal`` and ``--trigger`` measure the
product's selector (``retrieval.rerank.RerankSelector``) against.

The product reranks the pages the model named with the ranking's best (page choice ``model+rerank``), ranks
turns (signal ``turn``) and pages in unasked when the recall gate says so (trigger ``gate``). Each other value of
each choice is a subclass here overriding the one thing it changes, and ``lab_selector`` builds the selector of
any combination; the eval hands it to ``Conversation.ask`` (a ``PageSelector`` like any other).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Sequence

from ..core.choices import choose
from ..core.pager import Pager
from ..core.text import is_question
from ..retrieval.choices import DEFAULT_PAGE_CHOICE, DEFAULT_SIGNAL, PageChoice, Signal
from ..retrieval.index import PageIndex
from ..retrieval.ranking import LexicalIndex, TurnHit, best_per_page
from ..retrieval.rerank import RerankSelector, RerankSettings, candidate, score_of
from ..runtime.choices import DEFAULT_TRIGGER, Trigger
from ..runtime.selector import Injection
from ..runtime.trace import Candidate


# -- the question-form trigger's rule --------------------------------------------------------------------
@dataclass
class QuestionRule:
    """When the ``question`` trigger pages a message in: a question when its best fused score reaches
    ``question_threshold``, any other message when it reaches ``statement_threshold`` (None: never), and only
    when the best page leads the second by ``min_margin``. The defaults (any question) are what
    ``benchmarks/retrieval_fusion.py`` found: no similarity rule told probes from small talk on the generated set
    (its small talk is 95% questions and repeats filler it already said), while on LoCoMo the question form alone
    paged in every probe and 27% of small talk (any best-cosine threshold that keeps the probes pages in 99-100%
    of it). The recall gate (``retrieval.gate``) replaced this rule in the product."""

    question_threshold: float = 0.0
    statement_threshold: float | None = None
    min_margin: float = 0.0


@dataclass
class TriggerFeatures:
    """What the question trigger can see of a message before the model runs."""

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


def should_recall(features: TriggerFeatures, rule: QuestionRule | None = None) -> bool:
    """Page in without the model asking: see ``QuestionRule``."""
    r = rule or QuestionRule()
    if features.pages == 0 or features.margin < r.min_margin:
        return False
    threshold = r.question_threshold if features.question else r.statement_threshold
    return threshold is not None and features.score >= threshold


# -- the selectors ------------------------------------------------------------------------------------------
class LabSelector(RerankSelector):
    """The product's selector, saying which of the eval's choices it makes (``trigger`` is also what the trace
    names when it fires); the variants below change one each."""

    page_choice: str = DEFAULT_PAGE_CHOICE
    signal: str = DEFAULT_SIGNAL
    trigger: str = DEFAULT_TRIGGER


class QuestionTrigger(LabSelector):
    """Trigger ``question``: any message in question form pages in while pages are evicted (``QuestionRule``), the
    rule before the gate. It pages in every probe, but also every general question ("How do I tie a tie?"
    answered from an unrelated memory)."""

    trigger = Trigger.QUESTION
    rule = QuestionRule()

    def should_recall(self, question: str, pager: Pager) -> bool:
        self.last_gate = None
        if not pager.evicted:
            return False
        hits = self._ranked(question, pager, pager.evicted)
        return should_recall(trigger_features(question, hits), self.rule)


class NoTrigger(LabSelector):
    """Trigger ``off``: only the model's own recall call pages in, which small models make too rarely."""

    trigger = Trigger.OFF

    def should_recall(self, question: str, pager: Pager) -> bool:
        self.last_gate = None
        return False


class ModelPages(LabSelector):
    """Page choice ``model``: exactly the pages the model named, in its order (score 1/rank), the ranking only
    choosing each page's best turn. Small models name the wrong page; this measures by how much. Nothing pages in
    unasked (there is no ranking of pages to page in), whatever the trigger."""

    def should_recall(self, question: str, pager: Pager) -> bool:
        self.last_gate = None
        return False

    def _candidates(self, question: str, named: Sequence[int], pager: Pager) -> tuple[dict, list[Candidate]]:
        hits = self._page_hits(question, pager, named) if named else {}
        order = list(named)
        return hits, [candidate(pid, hits, named, 1.0 / (1 + order.index(pid))) for pid in order]

    def _below_best(self, c: Candidate, best: Candidate) -> bool:
        return False  # the model's pages are all injected, as far as ``max_pages`` allows


class RankedPages(LabSelector):
    """Page choice ``rerank``: the ranking's best ``top_k`` pages alone, whatever the model named: what the
    ranking finds without the model's help."""

    def _candidates(self, question: str, named: Sequence[int], pager: Pager) -> tuple[dict, list[Candidate]]:
        hits = self._page_hits(question, pager, named)
        return hits, [candidate(pid, hits, named, score_of(hits, pid)) for pid in list(hits)[: self.settings.top_k]]


class StoredSignal(LabSelector):
    """Pages compared with the question by the cosine of one stored vector each (``signal``) instead of the
    ranking of their turns, to measure keyword strategies (README, "Keywords"). Only the evicted pages are
    candidates, and no later turn restating the chosen one goes first (there is no chosen turn)."""

    def _page_hits(self, question: str, pager: Pager, named: Sequence[int] = ()) -> dict:
        evicted = [p.page_id for p in pager.evicted]
        self.index.update(self.conv_id, pager.evicted, pager.turns, pager.bookmark, (self.signal,))
        return {h.page_id: h for h in self.index.rank(self.conv_id, question, evicted, self.signal)}

    def _newest_wins(self, question: str, pager: Pager, injections: list[Injection], candidates: list[Candidate],
                     room: int | None) -> list[Injection]:
        return injections


class BookmarkSignal(StoredSignal):
    """Signal ``bookmark``: a page is its keywords (its bookmark line)."""

    signal = Signal.BOOKMARK


class TextSignal(StoredSignal):
    """Signal ``text``: a page is its whole text, one embedding (one fact among twenty turns blurs)."""

    signal = Signal.TEXT


PAGE_CHOICES = {PageChoice.MODEL_RERANK: (), PageChoice.MODEL: (ModelPages,), PageChoice.RERANK: (RankedPages,)}
SIGNALS = {Signal.TURN: (), Signal.BOOKMARK: (BookmarkSignal,), Signal.TEXT: (TextSignal,)}
TRIGGERS = {Trigger.GATE: (), Trigger.QUESTION: (QuestionTrigger,), Trigger.OFF: (NoTrigger,)}


@cache
def selector_class(page_choice: PageChoice, signal: Signal, trigger: Trigger) -> type[LabSelector]:
    """The selector of one combination: the variants' classes, the page choice's first (the model's pages alone
    never page in, whatever the trigger)."""
    bases = PAGE_CHOICES[page_choice] + TRIGGERS[trigger] + SIGNALS[signal]
    if not bases:
        return LabSelector
    return type(f"LabSelector[{page_choice},{signal},{trigger}]", bases,
                {"page_choice": page_choice, "signal": signal, "trigger": trigger})


def lab_selector(index: PageIndex, conv_id: str, settings: RerankSettings | None = None,
                 lexical: LexicalIndex | None = None, *, page_choice: str = DEFAULT_PAGE_CHOICE,
                 signal: str = DEFAULT_SIGNAL, trigger: str = DEFAULT_TRIGGER) -> LabSelector:
    """The reranking selector of ``conv_id`` with these choices (the defaults: the product's)."""
    cls = selector_class(choose(PageChoice, page_choice, "page choice"), choose(Signal, signal, "signal"),
                         choose(Trigger, trigger, "trigger"))
    return cls(index, conv_id, settings, lexical)


def is_product(page_choice: str, signal: str, trigger: str) -> bool:
    """Whether these choices are the product's own selector's."""
    return (page_choice, signal, trigger) == (DEFAULT_PAGE_CHOICE, DEFAULT_SIGNAL, DEFAULT_TRIGGER)
