"""The recall loop: one answer from a local model over a paged conversation.

Prompt layout, chosen so that llama.cpp re-evaluates as little as possible:

    system instructions | bookmarks of evicted pages | resident turns | the new user turn

Between evictions the prompt only grows at its end. A question is first ranked against the evicted
pages (cheap: embeddings and BM25); when the selector's trigger fires (the recall gate, by default), or the
model itself answers ``recall(page_ids=[..])``, the selected turns are answered from in a focused prompt of their own
(``layouts.py``) on a second llama.cpp context, so the chat's prompt and KV cache stay as they were.
With the ``inline`` layout the recalled turns go after the user turn instead, for that answer only.
Every answer runs under a repetition guard (``guard.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable, Protocol, Sequence

from ..backends.base import BackendError, ChatBackend, Message, TextCallback
from ..core.answer_types import asks_when, asks_when_past
from ..core.dates import format_day, turn_dates
from ..core.facts import StandingFact, asks_what_is_remembered
from ..core.pager import Pager
from ..core.records import Turn
from ..backends.constraints import OneOf, RecallChoice, expresses
from .grammar import Decision, is_recall_prefix, parse_decision
from .guard import RETRY_PENALTY, RepetitionGuard, earlier_replies
from ..core.choices import choose
from .choices import DEFAULT_LAYOUT, OFFERED_RECALL_MODES, Fired, Layout, RecallMode
from .layouts import (INLINE_PROMPT, LATEST, Injection, answer_messages, check_layout, recalled_notes, turn_line,
                      wants_clock)
from .trace import Candidate, Citation, Trace

SYSTEM_PROMPT = "You are a helpful assistant. Answer briefly and only from what was said in this conversation."
# The standing facts the prompt's stable prefix shows (``core.facts``), after the system line: they change only
# when a durable fact is stated, so llama.cpp keeps them in its cache with the rest of the prefix.
FACTS_PROMPT = "What the user has told you about themselves:\n{facts}"
# The answer when what a recall found does not answer the question (``retrieval.answerable``): LoCoMo's scorer
# and the eval read "not mentioned" as an abstention.
NOT_REMEMBERED = "I don't remember that: it was not mentioned in our conversation, or it was forgotten."
MEMORY_PROMPT = (
    "Older parts of this conversation were moved to numbered pages. Bookmarks (page: keywords):\n"
    "{bookmarks}\n"
    "To read pages before answering, reply only with recall(page_ids=[N])."
)


class ContextOverflowError(ValueError):
    """A turn that cannot fit in the model's context whatever is evicted."""


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
    layout: Layout = DEFAULT_LAYOUT  # how a recall is answered (see localpager.runtime.layouts)
    # A question asking when is answered with one of the dates the recalled turns speak of (``dates.turn_dates``:
    # "yesterday" said on 8 May 2023 is "7 May 2023"), chosen by the model under a grammar, when they have any.
    date_answers: bool = True
    repeat_penalty: float = 1.0  # llama.cpp's penalty on recent tokens; the repetition guard runs regardless
    # The long-term layer (``core.facts``): standing facts in the prompt's prefix (``fact_share`` of the memory
    # budget), answers from the ones that bear on a message, and "what do you remember about me?" answered with
    # them. A fact answer begins by quoting the fact it was given (``fact_lead``: "You told me: ..."): a 135M model
    # handed the fact weaves it in about half the time. ``abstain``: "not remembered" when what a recall found is
    # below the relevance floor (``retrieval.answerable``).
    facts: bool = True
    fact_share: float = 0.12
    fact_lead: bool = True
    abstain: bool = True

    def __post_init__(self) -> None:
        self.mode = choose(RecallMode, self.mode, "recall mode", offered=OFFERED_RECALL_MODES)
        self.layout = check_layout(self.layout)
        if self.max_pages < 1 or self.max_rounds < 1 or self.max_answer_tokens < 1:
            raise ValueError("max_pages, max_rounds and max_answer_tokens must be at least 1")


@dataclass
class FactContext:
    """What an answer sees of the long-term layer: the standing facts the prompt's prefix shows, every current
    one (for "what do you remember about me?"), the bookmarks of the most recent evicted pages, and every fact
    with the replaced ones (the trace names what a fact answer's fact replaced)."""

    shown: Sequence[StandingFact] = ()
    current: Sequence[StandingFact] = ()
    recent: Sequence[str] = ()
    every: Sequence[StandingFact] = ()


class PageSelector(Protocol):
    """Decides what a recall injects. The model names pages; a selector may rerank or add others.

    A selector whose ``should_recall`` applies one of the triggers (``runtime.choices.Trigger``) names it in
    ``trigger``, which the trace repeats when it fires; the trace says ``selector`` for any other rule."""

    def should_recall(self, question: str, pager: Pager) -> bool:
        """Whether to page in although the model chose to answer directly."""

    def select(
        self, question: str, named: Sequence[int], pager: Pager, room: int
    ) -> tuple[list[Injection], list[Candidate]]:
        """The pages to inject, best first, within ``room`` tokens, and every candidate considered."""


class ModelChoiceSelector:
    """Injects exactly the pages the model named, in its order, as far as they fit."""

    def should_recall(self, question: str, pager: Pager) -> bool:
        return False

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


def turn_message(turn: Turn) -> Message:
    content = f"{turn.speaker}: {turn.text}" if turn.speaker else turn.text
    return Message(turn.role if turn.role in ("user", "assistant") else "user", content)


def system_message(pager: Pager, show_bookmarks: bool = True, facts: Sequence[StandingFact] = ()) -> Message:
    """The system line, the standing facts, then the bookmarks: what changes least comes first."""
    content = system_text(facts)
    listed = pager.listed
    if listed and show_bookmarks:
        content += "\n" + MEMORY_PROMPT.format(bookmarks="\n".join(pager.bookmark(p) for p in listed))
    return Message("system", content)


def system_text(facts: Sequence[StandingFact] = ()) -> str:
    """The system message before the bookmarks: the system line and the standing facts shown."""
    if not facts:
        return SYSTEM_PROMPT
    return SYSTEM_PROMPT + "\n" + FACTS_PROMPT.format(facts="\n".join(f"- {fact_line(f)}" for f in facts))


def fact_line(fact: StandingFact) -> str:
    """A standing fact as the prompt shows it: the speaker's words, with the speaker's name in a transcript."""
    return f"{fact.speaker}: {fact.text}" if fact.speaker else fact.text


STANDING_FACT = "standing fact"  # a citation's label: the answer was given this standing fact
OVERVIEW_FACTS = 12  # standing facts an overview lists at most


def fact_turn(fact: StandingFact) -> Turn:
    """A standing fact as a note's line: its words, said by its speaker at its source turn's time."""
    return Turn(role="user", text=fact.text, index=fact.turn, time=fact.time, speaker=fact.speaker)


def fact_lead(fact: StandingFact) -> str:
    """How a fact answer begins: the fact quoted, as said ("You told me: ..."; a transcript's "Caroline said: ...")."""
    who = f"{fact.speaker} said" if fact.speaker else "You told me"
    return f'{who}: "{fact.text}"'


def overview_facts(facts: Sequence[StandingFact]) -> list[StandingFact]:
    """The standing facts an overview lists: pinned first, then the newest, at most ``OVERVIEW_FACTS``."""
    return sorted(facts, key=lambda f: (not f.pinned, -f.fact_id))[:OVERVIEW_FACTS]


def overview_text(facts: FactContext) -> str:
    """The answer to "what do you remember about me?": the standing facts, each with its day, and the topics
    of the latest evicted pages."""
    chosen = overview_facts(facts.current)
    lines = []
    if chosen:
        lines.append("Here is what I remember about you:" if any(not f.speaker for f in chosen)
                     else "Here is what I remember:")
        lines += [f"- {fact_line(f)}" + (f" ({format_day(f.time)})" if f.time else "") for f in chosen]
    if facts.recent:
        lines.append("Lately we talked about: " + "; ".join(facts.recent) + ".")
    if not lines:
        lines.append("I don't remember anything about you yet: nothing you told me is kept as a standing fact, "
                     "and nothing has been paged out.")
    return "\n".join(lines)


def _spaced_after(sink: TextCallback) -> TextCallback:
    """``sink``, given a space before the first text when that text does not begin with one: an answer that goes
    on after a quoted fact reads 'You told me: "..." Noted.', not '..."Noted.'."""
    started = False

    def feed(text: str) -> None:
        nonlocal started
        if not started and text:
            started = True
            if not text[0].isspace():
                text = " " + text
        sink(text)

    return feed


def kept_parts(backend: ChatBackend, layout: str, notes: str, question: str, recent: Sequence[Message],
               prompt: Sequence[int]) -> tuple[int, ...]:
    """The prefixes of a focused answer ``prompt`` worth keeping on the side context (``keep`` of
    ``generate``): the part every recall shares (system line and header) and that part with these notes
    (the same turns recalled for another question). Each is the prompt's common prefix with the same layout
    rendered without notes or without the question, so a token merged across a boundary is never kept.
    Empty for a backend that keeps no prefixes."""
    if not getattr(backend, "keeps_prefixes", False):
        return ()
    fixed = _common(prompt, backend.render(answer_messages(layout, "", "", recent)))
    with_notes = _common(prompt, backend.render(answer_messages(layout, notes, "", recent)))
    return tuple(n for n in dict.fromkeys((fixed, with_notes)) if 0 < n < len(prompt))


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


class Runtime:
    """Answers over a pager with a chat backend; the recall loop and nothing else.

    ``side`` returns a second context on the same model (``ChatBackend.fork``), where focused recall
    answers run; without it they run on ``backend`` and the chat's KV cache is rebuilt on the next turn."""

    def __init__(self, backend: ChatBackend, settings: RecallSettings | None = None,
                 selector: PageSelector | None = None, side: Callable[[], ChatBackend] | None = None):
        self.backend = backend
        self.settings = settings or RecallSettings()
        self.selector = selector or ModelChoiceSelector()
        self._side = side
        self.earlier: tuple[str, ...] = ()  # the last replies of the conversation being answered (``answer``)

    @property
    def answer_backend(self) -> ChatBackend:
        return self._side() if self._side is not None else self.backend

    def _keeping_context(self) -> tuple[Layout, ChatBackend] | None:
        """The answer layout and the context that answers recalls, when that context keeps prompt prefixes and the
        layout has an answer prompt of its own (not ``inline``); None otherwise: nothing to read ahead."""
        layout = self.settings.layout
        if layout == Layout.INLINE:
            return None
        backend = self.answer_backend
        return (layout, backend) if getattr(backend, "keeps_prefixes", False) else None

    def prime_answer(self) -> bool:
        """Read the part every recall's answer prompt shares (system line and header) into the context that
        answers recalls, kept there (``keep``), so that the first recall reads only its notes and its question, as
        later ones do. False when there is nothing to do (kept already, the ``inline`` layout, a backend that
        keeps no prefixes)."""
        keeping = self._keeping_context()
        if keeping is None:
            return False
        layout, backend = keeping
        prompt = backend.render(answer_messages(layout, "-", "?", []))
        fixed = _common(prompt, backend.render(answer_messages(layout, "", "", [])))
        if not 0 < fixed < len(prompt) or backend.has_kept(prompt[:fixed]):  # after a forget's clear it is not
            return False
        backend.generate(prompt[:fixed + 1], max_tokens=1, keep=(fixed,))
        return True

    def read_ahead(self, pager: Pager, turn: int) -> tuple[int, ...] | None:
        """Read ``turn`` into the context that answers recalls as a recall's first note stands (after the fixed part
        ``prime_answer`` reads), kept there, so that a recall whose best turn it is reads only its question and
        what follows the note: the likeliest recalls read ahead while the user types, as an OS reads ahead the
        pages a program is about to want. The kept part ends where the note's line does, so it serves a note with
        a label or more turns after it too. The tokens kept, or None when there is nothing to keep or no room
        to keep it without pushing out another kept prefix (``kept_fits``)."""
        keeping = self._keeping_context()
        if keeping is None:
            return None
        layout, backend = keeping
        line = turn_line(pager.turns[turn])
        prompt = backend.render(answer_messages(layout, line, "?", []))
        # the tokens this note's prompts share, whether the question, a label or another turn follows the line
        n = min(_common(prompt, backend.render(answer_messages(layout, line + " (" + LATEST + ")", "?", []))),
                _common(prompt, backend.render(answer_messages(layout, line + "\n" + line, "?", []))))
        if not 0 < n < len(prompt):
            return None
        if not backend.has_kept(prompt[:n]):
            if not backend.kept_fits(n):
                return None
            backend.generate(prompt[:n + 1], max_tokens=1, keep=(n,))
        return tuple(prompt[:n])

    def system_tokens(self, facts: Sequence[StandingFact] = ()) -> int:
        """Tokens of the system message without bookmarks (with the standing facts it shows): the pager's fixed
        overhead."""
        return len(self.backend.render([Message("system", system_text(facts))], add_generation_prompt=False))

    def max_turn_tokens(self, budget: int) -> int:
        """The longest turn that can be answered: the context minus the memory budget and the answer."""
        return self.backend.n_ctx - budget - self.settings.max_answer_tokens - 32

    def messages(self, pager: Pager, question: str | None, show_bookmarks: bool = True,
                 facts: Sequence[StandingFact] = ()) -> list[Message]:
        """The prompt's messages; ``question`` is appended when it is not a turn of the pager."""
        messages = [system_message(pager, show_bookmarks, facts)]
        for page in pager.resident:
            messages += [turn_message(pager.turns[i]) for i in page.turn_range if pager.turns[i].text]  # not forgotten
        if question is not None:
            messages.append(Message("user", question))
        return messages

    def fit(self, messages: list[Message]) -> tuple[list[Message], list[int]]:
        """Render ``messages``; if too long for the context, drop the oldest turns (never the system
        message or the last turn)."""
        limit = self.backend.n_ctx - self.settings.max_answer_tokens - self.settings.decision_tokens
        tokens = self.backend.render(messages)
        while len(tokens) > limit and len(messages) > 2:
            messages = [messages[0]] + messages[2:]
            tokens = self.backend.render(messages)
        if len(tokens) > limit:
            raise ContextOverflowError(
                f"the prompt needs {len(tokens)} tokens even with every older page evicted; "
                f"the context holds {self.backend.n_ctx}"
            )
        return messages, tokens

    def answer(self, pager: Pager, question: str, *, pending: bool = False, on_text: TextCallback | None = None,
               turn: int | None = None, selector: PageSelector | None = None, mode: str | None = None,
               layout: str | None = None, facts: FactContext | None = None) -> Trace:
        """Answer ``question``. With ``pending`` it is not a turn of ``pager`` (the last turn otherwise);
        ``selector`` decides what a recall injects (default: the runtime's); ``mode`` and ``layout``
        override the recall mode and the answer layout for this answer; ``facts``: the standing facts.

        In order: a message asking what is remembered is answered with the standing facts and the recent
        bookmarks; a standing fact that bears on the message is answered from; a recall (the selector's trigger,
        or the model's own decision) is answered from the recalled turns, or "not remembered" when they are below
        the relevance floor; anything else from the chat's own prompt."""
        s = self.settings
        if mode is not None or layout is not None:
            s = replace(s, mode=mode or s.mode, layout=layout or s.layout)
        selector = selector or self.selector
        facts = facts if facts is not None and s.facts else FactContext()
        trace = Trace(turn=len(pager.turns) - 1 if turn is None else turn, question=question,
                      facts_shown=[f.fact_id for f in facts.shown])
        self.earlier = earlier_replies(pager.turns, question)  # an answer word for word one of them is made again
        show = s.show_bookmarks if s.show_bookmarks is not None else s.mode != "never"
        # the model can name only the pages whose bookmarks it sees; retrieval searches all evicted pages
        shown = pager.listed if show else []
        trace.bookmarks = [pager.bookmark(p) for p in shown]

        start = time.perf_counter()
        messages, prompt = self.fit(self.messages(pager, question if pending else None, show, facts.shown))
        trace.timings_ms["tokenize"] = _ms(start)
        trace.tokens["prompt"] = len(prompt)  # the chat's prompt, whether or not this answer reads it
        if s.facts and s.mode != RecallMode.NEVER and asks_what_is_remembered(question):
            self._overview(pager, facts, trace, on_text)
            return trace

        # Retrieval first: it costs milliseconds, and when it fires the chat prompt need not be read now.
        if s.mode in (RecallMode.AUTO, RecallMode.SELECTOR) and self._retrieval_trigger(question, pager, selector,
                                                                                          trace):
            trace.trigger = Fired(getattr(selector, "trigger", Fired.SELECTOR))  # which trigger fired
        hits = self._fact_hits(question, selector, trace, s)
        if hits and self._from_facts(pager, question, hits, messages, trace, on_text, s):
            return trace
        decision, decision_tokens = Decision(), []
        shown_ids = [p.page_id for p in shown]
        if trace.trigger == Fired.NONE and shown_ids and s.mode in (RecallMode.AUTO, RecallMode.ALWAYS):
            decision, decision_tokens = self._decide(prompt, shown_ids, trace, s)
            if decision.is_recall:
                trace.trigger = Fired.FORCED if s.mode == RecallMode.ALWAYS else Fired.MODEL
                trace.model_page_ids = list(decision.page_ids)
        if trace.trigger != Fired.NONE:
            if self._recall(pager, question, list(decision.page_ids), messages, prompt, trace, on_text,
                            selector, s, shown_ids):
                return trace
        self._continue(prompt, decision_tokens, decision.answer_start, trace, on_text, s,
                       prefill_stage="prefill" if not decision_tokens else "answer_decode")
        return trace

    # -- the long-term layer ----------------------------------------------------------------------
    def _fact_hits(self, question: str, selector: PageSelector, trace: Trace, s: RecallSettings) -> list:
        """The standing facts the selector judges to bear on ``question`` (none without memory)."""
        finder = getattr(selector, "facts_for", None)
        if finder is None or not s.facts or s.mode in (RecallMode.NEVER, RecallMode.ALWAYS):
            return []  # never: no memory; always: a recall is forced, what a standing fact would answer too
        start = time.perf_counter()
        hits = finder(question)
        trace.timings_ms["rerank"] += _ms(start)
        trace.facts = [h.to_dict() for h in hits]
        return hits

    def _from_facts(self, pager: Pager, question: str, hits: Sequence, messages: list[Message], trace: Trace,
                    on_text: TextCallback | None, s: RecallSettings) -> bool:
        """Answer from the standing facts judged to bear on the question, in the focused layout on the side
        context (as a recall is answered): they are the notes, and with ``fact_lead`` the answer begins by
        quoting the best of them, so even a tiny model's answer carries what the user said."""
        layout = Layout.FOCUSED if s.layout == Layout.INLINE else s.layout
        backend = self.answer_backend
        start = time.perf_counter()
        recent = self._recent(messages, layout)
        lines = [fact_turn(h.fact) for h in hits]
        notes = "\n".join(turn_line(t) for t in lines)
        answer_prompt = backend.render(answer_messages(layout, notes, question, recent))
        lead = fact_lead(hits[0].fact) if s.fact_lead else ""
        prompt = list(answer_prompt) + (backend.tokenize(lead) if lead else [])
        trace.timings_ms["recall_fetch"] += _ms(start)
        keep = kept_parts(backend, layout, notes, question, recent, answer_prompt)
        gen, text = self._generate_answer(backend, prompt, s.max_answer_tokens, on_text, s, lead=lead, keep=keep,
                                          trace=trace, apart=True)
        trace.timings_ms["injection_prefill"] += gen.prefill_ms
        trace.timings_ms["answer_decode"] += gen.decode_ms
        trace.add_tokens(gen.evaluated, gen.reused, len(gen.tokens), gen.prompt_tokens, kind="answer")
        trace.tokens["answer_prompt"] = gen.prompt_tokens
        trace.decision, trace.answer, trace.stopped = "fact", text, gen.stopped
        trace.citations = [Citation(page_id=pager.page_of_turn(h.fact.turn).page_id, turn=h.fact.turn,
                                    text=h.fact.text, speaker=h.fact.speaker or "user", time=h.fact.time,
                                    label=STANDING_FACT) for h in hits]
        trace.cite(text)
        return True

    def _overview(self, pager: Pager, facts: FactContext, trace: Trace, on_text: TextCallback | None) -> None:
        """What is remembered, listed: the standing facts (pinned first, then the newest) and the topics of the
        most recent evicted pages, written out as they are, with no model: a list a user can check and correct."""
        text = overview_text(facts)
        if on_text is not None:
            on_text(text)
        chosen = overview_facts(facts.current)
        trace.decision, trace.answer, trace.stopped = "overview", text, "eos"
        trace.citations = [Citation(page_id=pager.page_of_turn(f.turn).page_id, turn=f.turn, text=f.text,
                                    speaker=f.speaker or "user", time=f.time, label=STANDING_FACT, used=True)
                           for f in chosen]

    def _below_floor(self, question: str, pager: Pager, injections: Sequence[Injection], selector: PageSelector,
                     trace: Trace, s: RecallSettings) -> bool:
        """Whether what a recall found does not answer the question (the selector's ``answerable``; none: it
        does), recorded in the trace."""
        check = getattr(selector, "answerable", None)
        if check is None or not s.abstain:
            return False
        verdict = check(question, pager, injections)
        trace.answerable = verdict.to_dict()
        return not verdict.answer

    @staticmethod
    def _not_remembered(trace: Trace, candidates: Sequence[Candidate], on_text: TextCallback | None) -> None:
        for c in candidates:
            if c.injected:
                c.injected, c.reason = False, "below the relevance floor"
        trace.decision, trace.answer, trace.stopped = "unknown", NOT_REMEMBERED, "eos"
        if on_text is not None:
            on_text(NOT_REMEMBERED)

    # -- the steps ------------------------------------------------------------------------------
    def _decide(self, prompt: list[int], evicted_ids: list[int], trace: Trace, s: RecallSettings,
                stage: str = "prefill") -> tuple[Decision, list[int]]:
        """The grammar-constrained first output; stops as soon as it can no longer be a recall call."""
        choice = RecallChoice(tuple(evicted_ids), s.max_pages, allow_answer=s.mode == "auto")
        text = ""

        def decided(piece: str) -> bool:
            nonlocal text
            text += piece
            return not is_recall_prefix(text)

        gen = self.backend.generate(prompt, max_tokens=s.decision_tokens, constraint=choice,
                                    on_text=decided)
        trace.timings_ms[stage] += gen.prefill_ms
        trace.timings_ms["decision_decode"] += gen.decode_ms
        trace.add_tokens(gen.evaluated, gen.reused, len(gen.tokens), gen.prompt_tokens, kind="decision")
        decision = parse_decision(gen.text)
        return decision, ([] if decision.is_recall else gen.tokens)

    def _retrieval_trigger(self, question: str, pager: Pager, selector: PageSelector, trace: Trace) -> bool:
        start = time.perf_counter()
        triggered = selector.should_recall(question, pager)
        trace.timings_ms["rerank"] += _ms(start)
        gate = getattr(selector, "last_gate", None)  # the recall gate's verdict, when the selector asked it
        if gate is not None:
            trace.gate = gate.to_dict()
        return triggered

    def _recall(self, pager, question, named, messages, prompt, trace, on_text, selector, s, shown_ids) -> bool:
        """Answer from the selected turns under the settings' layout; False if nothing was selected or fits."""
        if s.layout == "inline":
            return self._recall_inline(pager, question, named, messages, prompt, trace, on_text, selector, s,
                                       shown_ids)
        start = time.perf_counter()
        backend = self.answer_backend
        recent = self._recent(messages, s.layout)
        frame = answer_messages(s.layout, "", question, recent)
        room = backend.n_ctx - len(backend.render(frame)) - s.max_answer_tokens - 16
        injections, candidates = selector.select(question, named, pager, room)
        trace.timings_ms["rerank"] += _ms(start)
        trace.candidates += candidates
        if not injections:
            return False
        if self._below_floor(question, pager, injections, selector, trace, s):
            self._not_remembered(trace, candidates, on_text)
            return True
        start = time.perf_counter()
        notes = recalled_notes(pager.turns, injections, wants_clock(question))
        answer_prompt = backend.render(answer_messages(s.layout, notes, question, recent))
        trace.timings_ms["recall_fetch"] += _ms(start)
        self._record_injections(pager, injections, trace)
        dates = self._date_choice(pager, question, injections) if s.date_answers else None
        if dates is not None and not expresses(backend, dates):  # a server that constrains nothing answers freely
            dates = None
        keep = kept_parts(backend, s.layout, notes, question, recent, answer_prompt)
        gen, text = self._generate_answer(backend, answer_prompt, s.max_answer_tokens, on_text, s, constraint=dates,
                                          keep=keep, trace=trace)
        trace.timings_ms["injection_prefill"] += gen.prefill_ms
        trace.timings_ms["answer_decode"] += gen.decode_ms
        trace.add_tokens(gen.evaluated, gen.reused, len(gen.tokens), gen.prompt_tokens, kind="answer")
        trace.tokens["answer_prompt"] = gen.prompt_tokens
        trace.answer, trace.stopped = text, gen.stopped
        trace.cite(trace.answer)
        return True

    @staticmethod
    def _recent(messages: list[Message], layout: str) -> list[Message]:
        """The chat's last exchange before the question, for the ``focused+recent`` layout."""
        if layout != "focused+recent":
            return []
        return [m for m in messages[1:-1] if m.role in ("user", "assistant")][-2:]

    def _recall_inline(self, pager, question, named, messages, prompt, trace, on_text, selector, s,
                       shown_ids) -> bool:
        """Inject the selected turns after the user turn, in the chat's own prompt.

        While rounds remain (``max_rounds``) and pages are still evicted, the model may recall again
        after reading what was injected, under a grammar naming only the pages not yet injected."""
        injected: list[Injection] = []
        answer_start, decided = "", []
        while True:
            start = time.perf_counter()
            room = self.backend.n_ctx - len(prompt) - s.max_answer_tokens - 64
            injections, candidates = selector.select(question, named, pager, room)
            done = {i.page.page_id for i in injected}
            injections = [i for i in injections if i.page.page_id not in done]
            trace.timings_ms["rerank"] += _ms(start)
            trace.candidates += candidates
            if not injections:
                break
            if not injected and self._below_floor(question, pager, injections, selector, trace, s):
                self._not_remembered(trace, candidates, on_text)
                return True
            start = time.perf_counter()
            recalled = INLINE_PROMPT.format(notes=recalled_notes(pager.turns, injections, wants_clock(question)),
                                            question=question)
            messages = messages + [Message("user", recalled)]
            prompt = self.backend.render(messages)
            trace.timings_ms["recall_fetch"] += _ms(start)
            injected += injections
            trace.rounds += 1
            done = {i.page.page_id for i in injected}
            remaining = [pid for pid in shown_ids if pid not in done]
            if trace.rounds >= s.max_rounds or not remaining or s.mode != "auto":
                break
            decision, decided = self._decide(prompt, remaining, trace, s, stage="injection_prefill")
            if not decision.is_recall:
                answer_start = decision.answer_start
                break
            named = list(decision.page_ids)
            trace.model_page_ids += named
            # after reading, the model asked for more: it gets the pages it named (a selector would rank the
            # page it has already read first again)
            selector = ModelChoiceSelector()
        if not injected:
            return False
        self._record_injections(pager, injected, trace, rounds=trace.rounds)
        self._continue(prompt, decided, answer_start, trace, on_text, s,
                       prefill_stage="answer_decode" if decided else "injection_prefill")
        trace.cite(trace.answer)
        return True

    @staticmethod
    def _record_injections(pager: Pager, injections: Sequence[Injection], trace: Trace, rounds: int = 1) -> None:
        trace.decision = "recall"
        trace.rounds = rounds
        trace.injected_page_ids = list(dict.fromkeys(i.page.page_id for i in injections))
        trace.injected_turns = [t for i in injections for t in i.turns]
        trace.citations = [
            Citation(page_id=i.page.page_id, turn=t, time=pager.turns[t].time, speaker=pager.turns[t].speaker
                     or pager.turns[t].role, text=pager.turns[t].text, label=i.labels.get(t, ""))
            for i in injections for t in i.turns
        ]

    @staticmethod
    def _date_choice(pager: Pager, question: str, injections: Sequence[Injection]) -> OneOf | None:
        """For a question asking when: a constraint allowing exactly one of the dates the recalled turns speak of
        (a small model given "yesterday" and the day it was said answers "yesterday"). The day a turn was said
        is one of them only when the question asks when something happened ("when did…"); "when is my yoga
        class?" is answered from the turn's words. None when no such date is there."""
        if not asks_when(question):
            return None
        past = asks_when_past(question)
        dates = [d for i in injections for t in i.turns
                 for d in turn_dates(pager.turns[t].text, pager.turns[t].time, said=past)]
        return OneOf(tuple(dates)) if dates else None

    def _generate_answer(self, backend: ChatBackend, prompt: Sequence[int], max_tokens: int,
                         on_text: TextCallback | None, s: RecallSettings, lead: str = "",
                         constraint: OneOf | None = None, keep: Sequence[int] = (), trace: Trace | None = None,
                         apart: bool = False):
        """Generate under the repetition guard; the answer text is what the guard keeps. An answer that is word
        for word one of the conversation's last replies (``self.earlier``) was held back whole: it is generated
        once more with a penalty on repeated tokens, and the trace says so (``repeated``)."""
        options: dict = {"repeat_penalty": s.repeat_penalty} if s.repeat_penalty != 1.0 else {}
        if constraint is not None:
            options["constraint"] = constraint
        if keep:
            options["keep"] = tuple(keep)
        gen, guard = self._guarded(backend, prompt, max_tokens, on_text, lead, options, apart)
        if guard.repeats_earlier:
            if trace is not None:  # the first generation's cost counts too
                trace.add_tokens(gen.evaluated, gen.reused, len(gen.tokens), gen.prompt_tokens, kind="answer")
                trace.timings_ms["answer_decode"] += gen.prefill_ms + gen.decode_ms
            options["repeat_penalty"] = max(RETRY_PENALTY, s.repeat_penalty)
            gen, guard = self._guarded(backend, prompt, max_tokens, on_text, lead, options, apart)
            if trace is not None:
                trace.repeated = "sent again" if guard.repeats_earlier else "regenerated"
        guard.flush()
        return gen, guard.text.strip()

    def _guarded(self, backend: ChatBackend, prompt: Sequence[int], max_tokens: int, on_text: TextCallback | None,
                 lead: str, options: dict, apart: bool = False):
        """One generation under a ``RepetitionGuard`` that knows the conversation's last replies."""
        guard = RepetitionGuard(on_text, self.earlier)
        feed: TextCallback = guard
        if lead:
            guard(lead)
            if apart:  # a quoted fact: what the model goes on with is a sentence of its own
                feed = _spaced_after(guard)
        return backend.generate(prompt, max_tokens=max(1, max_tokens), on_text=feed, **options), guard

    def _continue(self, prompt, decided_tokens, answer_start, trace, on_text, s, prefill_stage) -> None:
        """Generate the answer on the chat context, continuing after what the decision step already produced."""
        gen, text = self._generate_answer(self.backend, list(prompt) + list(decided_tokens),
                                          s.max_answer_tokens - len(decided_tokens), on_text, s, lead=answer_start,
                                          trace=trace)
        trace.timings_ms[prefill_stage] += gen.prefill_ms
        trace.timings_ms["answer_decode"] += gen.decode_ms
        trace.add_tokens(gen.evaluated, gen.reused, len(gen.tokens), gen.prompt_tokens, kind="answer")
        trace.answer, trace.stopped = text, gen.stopped


__all__ = ["BackendError", "ContextOverflowError", "Injection", "ModelChoiceSelector", "PageSelector",
           "RecallSettings", "Runtime"]
