"""How the runtime recalls and answers: ``RecallSettings``, one object every answer path reads."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.choices import choose
from .choices import DEFAULT_LAYOUT, OFFERED_RECALL_MODES, Layout, RecallMode


@dataclass
class RecallSettings:
    """How the runtime recalls. ``mode`` (a ``RecallMode``): ``auto`` lets the model choose, ``always`` makes it
    recall (when any page is evicted), ``never`` disables recall."""

    mode: RecallMode = RecallMode.AUTO
    max_pages: int = 2  # pages one recall may name
    max_rounds: int = 1  # recall rounds per answer
    max_answer_tokens: int = 96
    decision_tokens: int = 24  # enough for a recall call naming max_pages ids
    show_bookmarks: bool | None = None  # bookmarks in the system message; None: unless mode is never
    layout: Layout = DEFAULT_LAYOUT  # how a recall is answered (see localpager.runtime.prompts)
    # A question asking when is answered with one of the dates the recalled turns speak of (``dates.turn_dates``:
    # "yesterday" said on 8 May 2023 is "7 May 2023"), chosen by the model under a grammar, when they have any.
    date_answers: bool = True
    repeat_penalty: float = 1.0  # llama.cpp's penalty on recent tokens; the repetition guard runs regardless
    # The long-term layer (``core.facts``): standing facts in the prompt's prefix (``fact_share`` of the memory
    # budget), answers from the ones that bear on a message, and "what do you remember about me?" answered with
    # them. A fact answer is the fact it was given, quoted (``prompts.fact_lead``: "You told me: ..."), with no
    # model: a 135M model handed the fact wove it in about half the time and added tails of its own; without
    # ``fact_lead`` the model answers from it. ``abstain``: "not remembered" when what a
    # recall found is below the relevance floor (``retrieval.answerable``).
    facts: bool = True
    fact_share: float = 0.12
    fact_lead: bool = True
    abstain: bool = True
    # A recall's answer about the user's own life is the words of theirs it took its words from, quoted
    # (``prompts.recall_quote``), once it is checked (``grounding``); without it, the model's answer itself.
    quote_recalls: bool = True

    def __post_init__(self) -> None:
        self.mode = choose(RecallMode, self.mode, "recall mode", offered=OFFERED_RECALL_MODES)
        self.layout = check_layout(self.layout)
        if self.max_pages < 1 or self.max_rounds < 1 or self.max_answer_tokens < 1:
            raise ValueError("max_pages, max_rounds and max_answer_tokens must be at least 1")


def check_layout(layout: str) -> Layout:
    """``layout`` as a ``Layout``; ValueError naming the layouts otherwise."""
    return choose(Layout, layout, "layout")
