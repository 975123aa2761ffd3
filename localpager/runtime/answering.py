"""One question being answered: ``Answering``, the object every answer path takes.

What a path needs travels together (the pager, the question, the settings in force, the selector, the trace,
where the text goes, the chat's prompt) instead of as ten loose values, and so does what every path does the
same way: generating under the repetition guard and counting what a generation cost in the trace.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

from ..backends.base import ChatBackend, Generation, Message, TextCallback
from ..backends.constraints import OneOf
from ..core.facts import StandingFact
from ..core.pager import Pager
from .guard import RETRY_PENALTY, RepetitionGuard
from .prompts import NOT_REMEMBERED, QUOTE_OPENING
from .selector import PageSelector
from .settings import RecallSettings
from .trace import Trace

VERDICT = NOT_REMEMBERED.split(":")[0]  # "I don't remember that": what only memory's verdict says


@dataclass
class FactContext:
    """What an answer sees of the long-term layer: the standing facts the prompt's prefix shows, every current
    one (for "what do you remember about me?"), and every fact with the replaced ones (the trace names what a fact
    answer's fact replaced). In a conversation of a user, the user's facts across their conversations, in the
    order they were said: those of another conversation name it (``conv_id``), this one's name none."""

    shown: Sequence[StandingFact] = ()
    current: Sequence[StandingFact] = ()
    every: Sequence[StandingFact] = ()


@dataclass
class Answering:
    """One question on its way to an answer. ``earlier``: the conversation's last replies, which an answer must
    not repeat word for word (``guard.earlier_replies``); ``messages``/``prompt``: the chat's prompt, fitted to
    the context; ``shown_ids``: the evicted pages whose bookmarks the model sees (the pages it can name)."""

    pager: Pager
    question: str
    settings: RecallSettings
    selector: PageSelector
    trace: Trace
    sink: TextCallback | None = None
    facts: FactContext = field(default_factory=FactContext)
    earlier: tuple[str, ...] = ()
    messages: list[Message] = field(default_factory=list)
    prompt: list[int] = field(default_factory=list)
    shown_ids: list[int] = field(default_factory=list)

    def say(self, text: str) -> None:
        """Send an answer written without the model."""
        if self.sink is not None:
            self.sink(text)

    def generate(self, backend: ChatBackend, prompt: Sequence[int], max_tokens: int, *, lead: str = "",
                 constraint: OneOf | None = None, keep: Sequence[int] = (), apart: bool = False,
                 unquoted: bool = False) -> tuple[Generation, str]:
        """Generate under the repetition guard; the answer text is what the guard keeps. ``lead`` is sent first
        (what the decision step already produced, or a quoted fact: with ``apart`` what the model goes on with is
        a sentence of its own). An answer that is word for word one of ``earlier`` was held back
        whole: it is generated once more with a penalty on repeated tokens, and the trace says so (``repeated``).
        ``unquoted``: the answer was given no memory, so it may not open as a quote of the user's words
        (``QUOTE_OPENING``): such an answer is generated once more as a repeat is, and loses the opening if it
        still has it; nor go on into memory's verdict (``NOT_REMEMBERED``'s opening): it ends where that begins."""
        s = self.settings
        options: dict = {"repeat_penalty": s.repeat_penalty} if s.repeat_penalty != 1.0 else {}
        if constraint is not None:
            options["constraint"] = constraint
        if keep:
            options["keep"] = tuple(keep)
        claims = (QUOTE_OPENING,) if unquoted else ()
        verdicts = (VERDICT,) if unquoted else ()
        gen, guard = self._guarded(backend, prompt, max_tokens, lead, options, apart, claims, verdicts)
        if guard.repeats_earlier or guard.claims_memory:
            # the first generation's cost counts too
            self.trace.add_tokens(gen.evaluated, gen.reused, len(gen.tokens), gen.prompt_tokens, kind="answer")
            self.trace.timings_ms["answer_decode"] += gen.prefill_ms + gen.decode_ms
            options["repeat_penalty"] = max(RETRY_PENALTY, s.repeat_penalty)
            gen, guard = self._guarded(backend, prompt, max_tokens, lead, options, apart, claims, verdicts)
            self.trace.repeated = "sent again" if guard.repeats_earlier else "regenerated"
        if guard.claims_memory:
            guard.text = _without_opening(guard.text, QUOTE_OPENING)
            self.trace.repeated = "quote opening dropped"
        if guard.dropped_verdict:
            self.trace.repeated = "verdict dropped"
        guard.flush()
        return gen, guard.text.strip()

    def _guarded(self, backend: ChatBackend, prompt: Sequence[int], max_tokens: int, lead: str, options: dict,
                 apart: bool, claims: Sequence[str] = (),
                 verdicts: Sequence[str] = ()) -> tuple[Generation, RepetitionGuard]:
        guard = RepetitionGuard(self.sink, self.earlier, claims, verdicts)
        feed: TextCallback = guard
        if lead:
            guard(lead)
            if apart:
                feed = spaced_after(guard)
        return backend.generate(prompt, max_tokens=max(1, max_tokens), on_text=feed, **options), guard

    def count_answer(self, gen: Generation, prefill_stage: str) -> None:
        """Count an answer's generation in the trace: reading its prompt under ``prefill_stage``."""
        self.trace.timings_ms[prefill_stage] += gen.prefill_ms
        self.trace.timings_ms["answer_decode"] += gen.decode_ms
        self.trace.add_tokens(gen.evaluated, gen.reused, len(gen.tokens), gen.prompt_tokens, kind="answer")


def _without_opening(text: str, opening: str) -> str:
    """``text`` past ``opening`` and what follows it up to the first word ('You told me: "Boil an egg."' ->
    'Boil an egg.'), with its first letter capital; the quotation marks around the rest are dropped."""
    rest = text[len(opening):].lstrip(" :,-\u2014").strip()
    if len(rest) >= 2 and rest[0] in "\"\u201c" and rest[-1] in "\"\u201d":
        rest = rest[1:-1].strip()
    return rest[:1].upper() + rest[1:]


def spaced_after(sink: TextCallback) -> TextCallback:
    """``sink``, given a space before the first text when that text does not begin with one: what the model writes
    after a quoted fact reads 'You told me: "..." Here is the note.', not '..."Here is the note.'. What ``sink``
    returns is returned: the guard's stop (a loop after a quote went on to the token limit when it was dropped)."""
    started = False

    def feed(text: str) -> bool | None:
        nonlocal started
        if not started and text:
            started = True
            if not text[0].isspace():
                text = " " + text
        return sink(text)

    return feed


def elapsed_ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000
