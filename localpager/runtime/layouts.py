"""Answer prompts for a recall: how recalled turns and the question are laid out for the model.

A 135M model cannot read past a long system message with a bookmark list and hundreds of tokens of
resident turns: handed exactly the evidence turn inside the chat's full prompt it answered 0.25 of
generated probes, in a short prompt of its own (the turn, ``Question: …``, ``Answer in a few words.``)
0.63. So a recall is answered, by default, in a *focused* prompt on a second llama.cpp context; the
chat's own prompt and KV cache stay untouched. The other layouts stay selectable for larger models
and for measurement (``eval --layout``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from ..backends.base import Message
from ..core.choices import choose
from ..core.answer_types import asked_types, asks_when_past
from ..core.dates import annotate, format_day, format_time
from ..core.records import Page, Turn
from .choices import Layout

# Measured on the 72 generated probes of seed 0, evidence turn given (greedy, repetition guard): this
# system line 0.58; the chat's longer one ("... Answer briefly and only from what was said in this
# conversation.") 0.50; without the "From earlier" line 0.56; "Earlier I said: ..." 0.47.
ANSWER_SYSTEM = "You are a helpful assistant."
FOCUSED_PROMPT = "From earlier in this conversation:\n{notes}\n\nQuestion: {question}\nAnswer in a few words."
NOTES_SYSTEM = ANSWER_SYSTEM + "\nNotes from earlier in this conversation:\n{notes}"
INLINE_PROMPT = "Earlier in this conversation:\n{notes}\n\n{question}"

LATEST = "latest"
CHANGED = "changed later"


@dataclass
class Injection:
    """What of a recalled page goes into the prompt: the page, the turns shown of it (in the order shown)
    and a label for some of them (``latest``, or ``changed later`` for an older statement of the same thing)."""

    page: Page
    turns: list[int]
    labels: dict[int, str] = field(default_factory=dict)


def turn_line(turn: Turn, label: str = "", clock: bool = False) -> str:
    """One recalled turn as the model reads it: ``[1 December 2026] speaker: text (label)``, each relative date
    in the text followed by the date it means ("yesterday [7 May 2023]", ``dates.annotate``). The clock time
    only with ``clock`` (``wants_clock``): beside a number, a small model answers with the time."""
    when = f"[{(format_time if clock else format_day)(turn.time)}] " if turn.time else ""
    mark = f" ({label})" if label else ""
    return f"{when}{turn.speaker or turn.role}: {annotate(turn.text, turn.time)}{mark}"


def recalled_notes(turns: Sequence[Turn], injections: Sequence[Injection], clock: bool = False) -> str:
    """The recalled turns, one a line, in the order the selector chose (best or newest first)."""
    return "\n".join(turn_line(turns[i], inj.labels.get(i, ""), clock) for inj in injections for i in inj.turns)


def wants_clock(question: str) -> bool:
    """Whether the recalled lines show the clock time they were said at: only for a question asking at what
    time something happened ("What time did I call the plumber?")."""
    return "time" in asked_types(question) and asks_when_past(question)


def answer_messages(layout: str, notes: str, question: str, recent: Sequence[Message] = ()) -> list[Message]:
    """The messages of a recall answer under ``layout`` (all but ``inline``, which extends the chat's prompt)."""
    layout = check_layout(layout)
    if layout == Layout.FOCUSED:
        return [Message("system", ANSWER_SYSTEM), Message("user", FOCUSED_PROMPT.format(notes=notes, question=question))]
    if layout == Layout.FOCUSED_RECENT:
        return [Message("system", ANSWER_SYSTEM), *recent,
                Message("user", FOCUSED_PROMPT.format(notes=notes, question=question))]
    if layout == Layout.NOTES_SYSTEM:
        return [Message("system", NOTES_SYSTEM.format(notes=notes)), Message("user", question)]
    raise ValueError(f"the {layout} layout extends the chat's own prompt; it has no answer prompt of its own")


def check_layout(layout: str) -> Layout:
    """``layout`` as a ``Layout``; ValueError naming the layouts otherwise."""
    return choose(Layout, layout, "layout")
