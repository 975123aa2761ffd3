"""What a recall injects: the ``PageSelector`` interface, its abilities declared with their defaults, and the
``Injection`` records it returns.

The runtime asks a selector and never ranks itself. The default selector here injects exactly the pages the
model named; the product's (``retrieval.rerank.RerankSelector``) reranks them, pages in unasked when the recall
gate fires, finds the standing facts a message needs and judges whether what it found answers the question.
Each of those abilities is a method of ``PageSelector`` with a default that does nothing, so a selector declares
what it can do by overriding, and the runtime calls it as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

from ..core.facts import StandingFact
from ..core.pager import Pager
from ..core.records import Page
from .choices import Fired
from .trace import Candidate


@dataclass
class Injection:
    """What of a recalled page goes into the prompt: the page, the turns shown of it (in the order shown)
    and a label for some of them (``latest``, or ``changed later`` for an older statement of the same thing)."""

    page: Page
    turns: list[int]
    labels: dict[int, str] = field(default_factory=dict)


class Verdict(Protocol):
    """A decision the trace records as it was made (the recall gate's, the relevance floor's)."""

    def to_dict(self) -> dict: ...


class FloorVerdict(Verdict, Protocol):
    answer: bool  # False: what a recall found does not answer the question


class ForeignConversation(Protocol):
    """Another conversation of the same user to recall from (``retrieval.user_recall.ForeignRecall``): its pages
    and turns, and its own selector, which picks what of it to inject as a recall there would."""

    conversation: str
    pager: Pager
    selector: "PageSelector"


class FactMatch(Verdict, Protocol):
    """A standing fact judged to bear on a message."""

    fact: StandingFact


class PageSelector:
    """Decides what a recall injects. The model names pages; a selector may rerank or add others.

    ``trigger``: the trigger ``should_recall`` applies (a ``runtime.choices.Trigger``), which the trace repeats
    when it fires; ``selector`` (the default) for a rule of its own. ``last_gate``: the recall gate's verdict on
    the last message, when the selector asked it."""

    trigger: str = Fired.SELECTOR
    last_gate: Verdict | None = None

    def should_recall(self, question: str, pager: Pager) -> bool:
        """Whether to page in although the model chose to answer directly."""
        return False

    def select(self, question: str, named: Sequence[int], pager: Pager,
               room: int | None) -> tuple[list[Injection], list[Candidate]]:
        """The pages to inject, best first, within ``room`` tokens, and every candidate considered."""
        raise NotImplementedError

    def facts_for(self, question: str) -> Sequence[FactMatch]:
        """The standing facts that bear on ``question``, best first (none by default)."""
        return []

    def foreign(self, question: str, pager: Pager) -> ForeignConversation | None:
        """Another conversation of the user that answers ``question`` better than this one (None by default: a
        conversation of nobody's, or a selector that cannot search them)."""
        return None

    def asks_about_self(self, question: str) -> bool:
        """Whether ``question`` asks about the user's own life, which only memory can answer (never by default)."""
        return False

    def asks_for_value(self, question: str) -> bool:
        """Whether a question about the user asks for something they told, which "not remembered" answers when
        memory holds nothing, rather than for help (always by default: a selector that cannot tell abstains as
        before)."""
        return True

    def never_told(self, question: str) -> FloorVerdict | None:
        """A verdict that ``question`` asks for something told that memory never held (answered "not remembered"
        before any recall), or None: it may be answered (always None by default)."""
        return None

    def names_speaker(self, question: str, pager: Pager) -> bool:
        """Whether ``question`` names someone who speaks in ``pager``'s conversation (a transcript's person): it
        asks what they told, as a question about the user asks what the user told (never by default)."""
        return bool(self.speakers_named(question, pager))

    def speakers_named(self, question: str, pager: Pager) -> list[str]:
        """The people ``question`` names who speak in ``pager``'s conversation, lower case (none by default)."""
        return []

    def is_task(self, question: str) -> bool:
        """Whether ``question`` asks for work to be done ("help me write …"), not for what was said."""
        return False

    def answerable(self, question: str, pager: Pager, injections: Sequence[Injection]) -> FloorVerdict | None:
        """Whether what a recall found answers the question (the relevance floor); None: no floor, it does."""
        return None


class ModelChoiceSelector(PageSelector):
    """Injects exactly the pages the model named, in its order, as far as they fit."""

    def select(self, question, named, pager, room):
        return inject_in_order(pager, named, room, "named by the model", named_by_model=True)


def inject_in_order(pager: Pager, page_ids: Sequence[int], room: int, reason: str,
                    named_by_model: bool = False) -> tuple[list[Injection], list[Candidate]]:
    """Whole pages in the given order (score 1/rank), each as far as the remaining room allows."""
    injections, candidates = [], []
    for rank, page_id in enumerate(page_ids):
        page = pager.page(page_id)
        turns = fit_turns(pager, list(page.turn_range), room)
        candidate = Candidate(page_id=page_id, score=round(1.0 / (rank + 1), 4), named_by_model=named_by_model,
                              injected=bool(turns), reason=reason if turns else "no room left")
        if turns:
            injections.append(Injection(page, turns))
            room -= sum(pager.turn_tokens(pager.turns[i]) for i in turns)
        candidates.append(candidate)
    return injections, candidates


def fit_turns(pager: Pager, turns: list[int], room: int | None) -> list[int]:
    """The longest run of ``turns`` from their start that fits in ``room`` tokens (None: no limit, and nothing
    is counted, so no tokenizer loads: what ``Conversation.recall`` hands an app's own model)."""
    if room is None:
        return list(turns)
    kept, used = [], 0
    for i in turns:
        used += pager.turn_tokens(pager.turns[i])
        if used > room:
            break
        kept.append(i)
    return kept
