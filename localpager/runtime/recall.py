"""The recall loop: one answer from a local model over a paged conversation.

A message is answered by the first of four paths that takes it: a message asking what is remembered gets the
overview, a standing fact that bears on it is answered from (both in ``fact_answers``), a recall answers from
recalled turns, and anything else is answered from the chat's own prompt.

A question is first ranked against the evicted pages (cheap: embeddings and BM25); when the selector's trigger
fires (the recall gate, by default), or the model itself answers ``recall(page_ids=[..])``, the selected turns
are answered from in a focused prompt of their own (``prompts``) on a second llama.cpp context, so the chat's
prompt and KV cache stay as they were. With the ``inline`` layout the recalled turns go after the user turn
instead, for that answer only. Every answer runs under a repetition guard (``guard``).
"""

from __future__ import annotations

import functools
import time
from dataclasses import replace
from typing import Callable, Sequence

from ..backends.base import ChatBackend, Message, TextCallback
from ..backends.constraints import OneOf, RecallChoice, expresses
from ..core.answer_types import asks_when, asks_when_past, asks_when_told
from ..core.dates import relative, said_day, turn_dates
from ..core.facts import StandingFact, asks_what_is_remembered
from ..core.pager import Pager
from ..core.records import Turn
from ..core.text import is_question
from . import grounding, prefixes
from .answering import Answering, FactContext, elapsed_ms
from .choices import Fired, Layout, RecallMode
from .fact_answers import answer_from_facts, answer_overview, fact_hits
from .grammar import Decision, is_recall_prefix, parse_decision
from .guard import earlier_replies
from .prompts import (NOT_IN_WHAT_I_FOUND, NOT_REMEMBERED, answer_messages, chat_messages, inline_message,
                      recall_quote, recalled_notes, recent_exchange, system_text, turn_line, wants_clock)
from .selector import Injection, ModelChoiceSelector, PageSelector
from .settings import RecallSettings
from .trace import Candidate, Citation, Trace

# The relevance floor's probability at or above which a chat user's own line it judged is quoted when the model's
# answer about them fails the grounding check (``_sure_turn``), instead of "not remembered". Chosen on the tuning,
# development-kinds and training-kinds facts evals: of the 38 questions grounding turned into "not remembered",
# those whose injected page held the evidence had 0.71 and 0.74 (and 0.40-0.42), those about something never said,
# forgotten or on another page at most 0.505. Facts evals (``eval --budget 1024 --forget 2 --no-oracle``): one
# question more right on the development and the training kinds each, and on the check phrasing (written apart)
# and two on the held-out kinds (never tuned on); one forgotten question of the held-out kinds quoted another line
# of the user's; never-said questions as before everywhere. A transcript's lines are never quoted so: LoCoMo's
# answers are as before.
SURE_FLOOR = 0.6


class ContextOverflowError(ValueError):
    """A turn that cannot fit in the model's context whatever is evicted."""


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

    @property
    def answer_backend(self) -> ChatBackend:
        return self._side() if self._side is not None else self.backend

    def settings_with(self, mode: str | None = None, layout: str | None = None) -> RecallSettings:
        """The settings in force, with another recall mode or answer layout for one answer."""
        s = self.settings
        return replace(s, mode=mode or s.mode, layout=layout or s.layout) if mode or layout else s

    # -- what the context that answers recalls keeps read (``prefixes``) -------------------------
    def _keeping_context(self) -> tuple[Layout, ChatBackend] | None:
        """The answer layout and the context that answers recalls, when that context keeps prompt prefixes and the
        layout has an answer prompt of its own (not ``inline``); None otherwise: nothing to read ahead."""
        layout = self.settings.layout
        if layout == Layout.INLINE:
            return None
        backend = self.answer_backend
        return (layout, backend) if backend.keeps_prefixes else None

    def prime_answer(self) -> bool:
        """Read the part every recall's answer prompt shares into the context that answers recalls, so that the
        first recall reads only its notes and its question, as later ones do. False when there is nothing to do
        (kept already, the ``inline`` layout, a backend that keeps no prefixes)."""
        keeping = self._keeping_context()
        return keeping is not None and prefixes.prime(keeping[1], keeping[0])

    def read_ahead(self, pager: Pager, turn: int) -> tuple[int, ...] | None:
        """Read ``turn`` into the context that answers recalls as a recall's first note stands, kept there: the
        likeliest recalls read ahead while the user types, as an OS reads ahead the pages a program is about to
        want. The tokens kept, or None (``prefixes.read_ahead``)."""
        keeping = self._keeping_context()
        if keeping is None:
            return None
        return prefixes.read_ahead(keeping[1], keeping[0], turn_line(pager.turns[turn]))

    # -- the chat's prompt -------------------------------------------------------------------------
    def system_tokens(self, facts: Sequence[StandingFact] = ()) -> int:
        """Tokens of the system message without bookmarks (with the standing facts it shows): the pager's fixed
        overhead."""
        return len(self.backend.render([Message("system", system_text(facts))], add_generation_prompt=False))

    def max_turn_tokens(self, budget: int) -> int:
        """The longest turn that can be answered: the context minus the memory budget and the answer."""
        return self.backend.n_ctx - budget - self.settings.max_answer_tokens - 32

    @staticmethod
    def messages(pager: Pager, question: str | None, show_bookmarks: bool = True,
                 facts: Sequence[StandingFact] = ()) -> list[Message]:
        """The chat's prompt (``prompts.chat_messages``); ``question`` is appended when it is not a turn."""
        return chat_messages(pager, question, show_bookmarks, facts)

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

    # -- one answer --------------------------------------------------------------------------------
    def answer(self, pager: Pager, question: str, *, pending: bool = False, on_text: TextCallback | None = None,
               selector: PageSelector | None = None, settings: RecallSettings | None = None,
               facts: FactContext | None = None) -> Trace:
        """Answer ``question``. With ``pending`` it is not a turn of ``pager`` (the last turn otherwise);
        ``selector`` decides what a recall injects (default: the runtime's); ``settings`` for this answer
        (default: the runtime's; ``settings_with``); ``facts``: the standing facts.

        In order: a message asking what is remembered is answered with the standing facts and the recent
        bookmarks; a standing fact that bears on the message is answered from; a recall (the selector's trigger,
        or the model's own decision) is answered from the recalled turns, or "not remembered" when they are below
        the relevance floor; anything else from the chat's own prompt."""
        a = self._begin(pager, question, pending, on_text, selector, settings, facts)
        s, trace = a.settings, a.trace
        if s.facts and s.mode != RecallMode.NEVER and asks_what_is_remembered(question):
            answer_overview(a)
            return trace
        # Retrieval first: it costs milliseconds, and when it fires the chat prompt need not be read now.
        if s.mode in (RecallMode.AUTO, RecallMode.SELECTOR) and self._retrieval_trigger(a):
            trace.trigger = Fired(a.selector.trigger)  # which trigger fired
        hits = fact_hits(a)
        if hits:
            answer_from_facts(a, hits, self.answer_backend)
            return trace
        if self._never_told(a):
            return trace
        decision, decision_tokens = Decision(), []
        if trace.trigger == Fired.NONE and a.shown_ids and s.mode in (RecallMode.AUTO, RecallMode.ALWAYS):
            decision, decision_tokens = self._decide(a, a.prompt, a.shown_ids)
            if decision.is_recall:
                trace.trigger = Fired.FORCED if s.mode == RecallMode.ALWAYS else Fired.MODEL
                trace.model_page_ids = list(decision.page_ids)
        if trace.trigger == Fired.NONE and self._personal(a):
            trace.trigger = Fired.PERSONAL
        if trace.trigger != Fired.NONE and self._recall(a, list(decision.page_ids)):
            return trace
        # nothing to recall at all: nothing about it was said. Help it asks for ("My niece wants to make a card for my
        # pup. What should she write?") is the model's, as a question memory has nothing for.
        if trace.trigger == Fired.PERSONAL and a.selector.asks_for_value(question):
            self._not_remembered(a, [])
            return trace
        self._continue(a, a.prompt, decision_tokens, decision.answer_start,
                       prefill_stage="prefill" if not decision_tokens else "answer_decode")
        return trace

    def _begin(self, pager: Pager, question: str, pending: bool, on_text: TextCallback | None,
               selector: PageSelector | None, settings: RecallSettings | None,
               facts: FactContext | None) -> Answering:
        """The question as one object, with the chat's prompt fitted to the context."""
        s = settings or self.settings
        facts = facts if facts is not None and s.facts else FactContext()
        trace = Trace(turn=len(pager.turns) - 1, question=question, facts_shown=[f.fact_id for f in facts.shown])
        show = s.show_bookmarks if s.show_bookmarks is not None else s.mode != "never"
        shown = pager.listed if show else []  # the model can name only the pages whose bookmarks it sees
        trace.bookmarks = [pager.bookmark(p) for p in shown]
        start = time.perf_counter()
        messages, prompt = self.fit(chat_messages(pager, question if pending else None, show, facts.shown))
        trace.timings_ms["tokenize"] = elapsed_ms(start)
        trace.tokens["prompt"] = len(prompt)  # the chat's prompt, whether or not this answer reads it
        return Answering(pager, question, s, selector or self.selector, trace, sink=on_text, facts=facts,
                         earlier=earlier_replies(pager.turns, question), messages=messages, prompt=prompt,
                         shown_ids=[p.page_id for p in shown])

    # -- the steps ---------------------------------------------------------------------------------
    def _decide(self, a: Answering, prompt: list[int], page_ids: list[int],
                stage: str = "prefill") -> tuple[Decision, list[int]]:
        """The grammar-constrained first output; stops as soon as it can no longer be a recall call."""
        s = a.settings
        choice = RecallChoice(tuple(page_ids), s.max_pages, allow_answer=s.mode == "auto")
        text = ""

        def decided(piece: str) -> bool:
            nonlocal text
            text += piece
            return not is_recall_prefix(text)

        gen = self.backend.generate(prompt, max_tokens=s.decision_tokens, constraint=choice, on_text=decided)
        a.trace.timings_ms[stage] += gen.prefill_ms
        a.trace.timings_ms["decision_decode"] += gen.decode_ms
        a.trace.add_tokens(gen.evaluated, gen.reused, len(gen.tokens), gen.prompt_tokens, kind="decision")
        decision = parse_decision(gen.text)
        return decision, ([] if decision.is_recall else gen.tokens)

    @staticmethod
    def _retrieval_trigger(a: Answering) -> bool:
        start = time.perf_counter()
        triggered = a.selector.should_recall(a.question, a.pager)
        a.trace.timings_ms["rerank"] += elapsed_ms(start)
        if a.selector.last_gate is not None:  # the recall gate's verdict, when the selector asked it
            a.trace.gate = a.selector.last_gate.to_dict()
        return triggered

    @classmethod
    def _never_told(cls, a: Answering) -> bool:
        """A question asking for something told that memory never held (the selector's ``never_told``: no
        standing fact meets what such questions need): "not remembered" at once, where the floor may say so. A
        recall would page in the nearest turns, and the model would answer from them whatever they hold."""
        s = a.settings
        if not (s.abstain and s.facts and s.mode in (RecallMode.AUTO, RecallMode.SELECTOR)
                and (is_question(a.question) or a.selector.asks_about_self(a.question))):  # or requests it
            return False
        verdict = a.selector.never_told(a.question)
        if verdict is None:
            return False
        a.trace.answerable = verdict.to_dict()
        cls._not_remembered(a, [])
        return True

    @staticmethod
    def _personal(a: Answering) -> bool:
        """A question about the user's own life, or one naming someone who speaks in the conversation (a transcript's
        person: it asks what they told, ``names_speaker``), that neither a standing fact nor the model's recall
        answered: what memory holds about it, or that nothing is remembered, never the model's own answer (it would
        invent one, and its reply would read later as memory). Only where the floor may say so (``abstain``); not
        for a task ("write a note introducing my dog"): it asks for the model's work, which a fact may help but need
        not. Of a transcript's person, a question (not a line that mentions them): before, when the gate stayed shut,
        LoCoMo's "Why did Jon combine his clothing business with dance?" (Gina did) went to the model, which spoke
        for him: "Jon: I think it's because of the creative freedom ..." (LoCoMo 1-5: 9 of 237 never-said
        questions, and 17 answerable ones, F1 0.07)."""
        s, selector, question = a.settings, a.selector, a.question
        if not (s.abstain and s.mode in (RecallMode.AUTO, RecallMode.SELECTOR)):
            return False
        return ((selector.asks_about_self(question) and not selector.is_task(question))
                or (is_question(question) and selector.names_speaker(question, a.pager)))

    def _recall(self, a: Answering, named: list[int]) -> bool:
        """Answer from the selected turns under the settings' layout; False if nothing was selected or fits. In a
        conversation of a user, from another conversation of theirs whose turns match better (unless the model
        named pages of this one): that conversation's own selector picks from its pages, as a recall there would,
        and the answer is given them in a focused prompt (this chat's prompt knows nothing of them)."""
        if a.trace.trigger not in (Fired.MODEL, Fired.FORCED):
            foreign = a.selector.foreign(a.question, a.pager)
            if foreign is not None and self._recall_from(a, foreign.pager, foreign.selector, [],
                                                         foreign.conversation):
                return True
        if a.settings.layout == Layout.INLINE:
            return self._recall_inline(a, named)
        return self._recall_from(a, a.pager, a.selector, named)

    def _recall_from(self, a: Answering, pager: Pager, selector: PageSelector, named: list[int],
                     conversation: str | None = None) -> bool:
        """A recall answered in a focused prompt from what ``selector`` picks of ``pager`` (this conversation's,
        or with ``conversation`` another of the user's, cited so); "not remembered" below the relevance floor."""
        s, trace, question = a.settings, a.trace, a.question
        layout = Layout.FOCUSED if s.layout == Layout.INLINE else s.layout
        start = time.perf_counter()
        backend = self.answer_backend
        recent = recent_exchange(a.messages, layout)
        room = backend.n_ctx - len(backend.render(answer_messages(layout, "", question, recent)))
        injections, candidates = selector.select(question, named, pager, room - s.max_answer_tokens - 16)
        trace.timings_ms["rerank"] += elapsed_ms(start)
        if conversation is None:  # candidates are pages of this conversation
            trace.candidates += candidates
        if not injections:
            return False
        if self._below_floor(a, selector, pager, injections):
            return self._nothing_found(a, candidates)
        start = time.perf_counter()
        notes = recalled_notes(pager.turns, injections, wants_clock(question))
        answer_prompt = backend.render(answer_messages(layout, notes, question, recent))
        trace.timings_ms["recall_fetch"] += elapsed_ms(start)
        self._record_injections(pager, injections, trace, conversation=conversation)
        dates = self._date_choice(pager, question, injections) if s.date_answers else None
        if dates is not None and not expresses(backend, dates):  # a server that constrains nothing answers freely
            dates = None
        keep = prefixes.kept_parts(backend, layout, notes, recent, answer_prompt)
        # an answer about the user's own life, or about what a transcript's person told, is held back whole and
        # checked against what it was shown (a date chosen under the constraint is one the notes hold)
        checked = dates is None and s.abstain
        named = a.selector.speakers_named(question, a.pager) if checked else []
        held = checked and (a.selector.asks_about_self(question) or bool(named))
        sink, a.sink = a.sink, (None if held else a.sink)
        try:
            gen, text = a.generate(backend, answer_prompt, s.max_answer_tokens, constraint=dates, keep=keep)
        finally:
            a.sink = sink
        a.count_answer(gen, "injection_prefill")
        trace.tokens["answer_prompt"] = gen.prompt_tokens
        if held:
            # an answer to a question for a told value takes something from the notes; one asking when may answer
            # with a day relative to when it was said ("yesterday"), which is no content word: its digits are checked
            told = (a.selector.asks_about_self(question) and a.selector.asks_for_value(question)
                    and not asks_when(question))
            clock, stamped = wants_clock(question), grounding.stamps_answer(question, told)
            shown = functools.partial(grounding.evidence, pager.turns, injections, clock, stamped=stamped,
                                      question=question)
            # what the user, or the people named, told: their lines without the sentences that ask
            found = grounding.check(text, shown(), question, value=told,
                                    told_by=shown(named, told=True) if named else None,
                                    told=shown(told=True) if told else None)
            trace.grounding = found.to_dict()
            own = not named and not a.selector.is_task(question)  # the user's own life, not work nor a person's
            sure = None if found.grounded or not own else self._sure_turn(a, pager, injections)
            if not found.grounded and sure is None:  # the turns were injected and read: only the answer is not memory
                self._not_remembered(a, [], NOT_IN_WHAT_I_FOUND)
                return True
            if sure is not None:  # the user's own words the floor is sure of, not the model's that no note holds
                text = self._quote([sure], sure.text, question)
            elif s.quote_recalls and own:
                text = self._quoted(pager, injections, question, text)
            a.say(text)
        trace.answer, trace.stopped = text, gen.stopped
        trace.cite(trace.answer)
        return True

    @staticmethod
    def _sure_turn(a: Answering, pager: Pager, injections: Sequence[Injection]) -> Turn | None:
        """The turn the relevance floor judged, when it is sure of it (``SURE_FLOOR``) and it is a chat user's own
        line among those injected that tells something (not only asks): quoted, it answers with their words where
        the model's failed the check; else None."""
        verdict = a.trace.answerable or {}
        index = verdict.get("turn")
        if index is None or verdict.get("probability", 0.0) < SURE_FLOOR:
            return None
        turn = pager.turns[index]
        if (turn.role != "user" or turn.speaker or not turn.text
                or not any(index in inj.turns for inj in injections)
                or not grounding.tells(turn.text, a.question)):
            return None
        return turn

    @staticmethod
    def _quoted(pager: Pager, injections: Sequence[Injection], question: str, text: str) -> str:
        """``text``, a checked answer about the user's own life, as the words of theirs it took its words from
        (``grounding.sources``), quoted with the day each was said when that matters: the question asks when
        something happened, or the words speak of a day relative to it ("tomorrow"); ``text`` itself when it took
        none (a yes or a no, or a day the model read from when a line was said), or took a transcript's person's
        words (a question the personal model took for the user's, about someone it did not find named: "Mel")."""
        said = [pager.turns[i] for i in grounding.sources(text, pager.turns, injections, question)]
        if not said or any(t.speaker for t in said):  # a transcript's person is not the user who asks
            return text
        return Runtime._quote(said, text, question)

    @staticmethod
    def _quote(said: Sequence[Turn], text: str, question: str) -> str:
        """The user's turns ``said`` quoted as the answer (``recall_quote``): of a long one, the sentences ``text``
        took words from; with the day each was said when ``question`` asks when something happened or the words
        count from that day."""
        when = asks_when_past(question)
        return recall_quote([(grounding.excerpt(t.text, text, question),
                              t.time if when or relative(t.text, t.time) else None) for t in said],
                            asked=all(grounding.asks_only(t.text) for t in said))

    def _recall_inline(self, a: Answering, named: list[int]) -> bool:
        """Inject the selected turns after the user turn, in the chat's own prompt.

        While rounds remain (``max_rounds``) and pages are still evicted, the model may recall again
        after reading what was injected, under a grammar naming only the pages not yet injected."""
        s, trace, selector = a.settings, a.trace, a.selector
        messages, prompt = a.messages, a.prompt
        injected: list[Injection] = []
        answer_start, decided = "", []
        while True:
            start = time.perf_counter()
            room = self.backend.n_ctx - len(prompt) - s.max_answer_tokens - 64
            injections, candidates = selector.select(a.question, named, a.pager, room)
            done = {i.page.page_id for i in injected}
            injections = [i for i in injections if i.page.page_id not in done]
            trace.timings_ms["rerank"] += elapsed_ms(start)
            trace.candidates += candidates
            if not injections:
                break
            if not injected and self._below_floor(a, a.selector, a.pager, injections):
                return self._nothing_found(a, candidates)
            start = time.perf_counter()
            notes = recalled_notes(a.pager.turns, injections, wants_clock(a.question))
            messages = messages + [inline_message(notes, a.question)]
            prompt = self.backend.render(messages)
            trace.timings_ms["recall_fetch"] += elapsed_ms(start)
            injected += injections
            trace.rounds += 1
            done = {i.page.page_id for i in injected}
            remaining = [pid for pid in a.shown_ids if pid not in done]
            if trace.rounds >= s.max_rounds or not remaining or s.mode != "auto":
                break
            decision, decided = self._decide(a, prompt, remaining, stage="injection_prefill")
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
        self._record_injections(a.pager, injected, trace, rounds=trace.rounds)
        self._continue(a, prompt, decided, answer_start,
                       prefill_stage="answer_decode" if decided else "injection_prefill")
        trace.cite(trace.answer)
        return True

    @staticmethod
    def _below_floor(a: Answering, selector: PageSelector, pager: Pager, injections: Sequence[Injection]) -> bool:
        """Whether what a recall found in ``pager`` does not answer the question (``selector``'s ``answerable``;
        none: it does), recorded in the trace."""
        if not a.settings.abstain:
            return False
        verdict = selector.answerable(a.question, pager, injections)
        if verdict is None:
            return False
        a.trace.answerable = verdict.to_dict()
        return not verdict.answer

    @classmethod
    def _nothing_found(cls, a: Answering, candidates: Sequence[Candidate]) -> bool:
        """A recall below the relevance floor: nothing it found is injected. A question asking for something the user
        told is answered "not remembered" (True: answered); one asking for help ("My niece wants to make a card for
        my pup. What should she write?") is left to the model, as a question memory has nothing for (False). The
        value model reads a chat user's own questions: one naming a transcript's person asks what they told (it took
        LoCoMo's "When did John plan to return from his trip to Toronto and Vancouver?" for help)."""
        if a.selector.asks_for_value(a.question) or a.selector.names_speaker(a.question, a.pager):
            cls._not_remembered(a, candidates)
            return True
        cls._left_out(candidates)
        return False

    @staticmethod
    def _left_out(candidates: Sequence[Candidate]) -> None:
        """The candidates a recall would have injected, marked as left out below the relevance floor."""
        for c in candidates:
            if c.injected:
                c.injected, c.reason = False, "below the relevance floor"

    @classmethod
    def _not_remembered(cls, a: Answering, candidates: Sequence[Candidate], text: str = NOT_REMEMBERED) -> None:
        cls._left_out(candidates)
        a.trace.decision, a.trace.answer, a.trace.stopped = "unknown", text, "eos"
        a.say(text)

    @staticmethod
    def _record_injections(pager: Pager, injections: Sequence[Injection], trace: Trace, rounds: int = 1,
                           conversation: str | None = None) -> None:
        """The recall in the trace: its pages and turns and a citation each (``conversation``: another of the
        user's, whose pages are none of this one's: cited with it, no page)."""
        trace.decision = "recall"
        trace.rounds = rounds
        if conversation is None:
            trace.injected_page_ids = list(dict.fromkeys(i.page.page_id for i in injections))
            trace.injected_turns = [t for i in injections for t in i.turns]
        trace.citations = [
            Citation(page_id=None if conversation else i.page.page_id, turn=t, time=pager.turns[t].time,
                     speaker=pager.turns[t].speaker or pager.turns[t].role, text=pager.turns[t].text,
                     label=i.labels.get(t, ""), conversation=conversation)
            for i in injections for t in i.turns
        ]

    @staticmethod
    def _date_choice(pager: Pager, question: str, injections: Sequence[Injection]) -> OneOf | None:
        """For a question asking when: a constraint allowing exactly one of the dates the recalled turns speak of
        (a small model given "yesterday" and the day it was said answers "yesterday"). The day a turn was said
        is one of them only when the question asks when something happened ("when did…"); "when is my yoga
        class?" is answered from the turn's words. A question asking when its speaker said something ("When did I
        mention my plumber?") has the days the people's recalled turns were said, and no day their words speak of.
        None when no such date is there."""
        if not asks_when(question):
            return None
        past, told = asks_when_past(question), asks_when_told(question)
        turns = [pager.turns[t] for i in injections for t in i.turns]
        dates = [d for turn in turns if not told or turn.by_person
                 for d in (said_day(turn.time) if told else turn_dates(turn.text, turn.time, said=past))]
        return OneOf(tuple(dict.fromkeys(dates))) if dates else None

    def _continue(self, a: Answering, prompt: Sequence[int], decided_tokens: Sequence[int], answer_start: str,
                  prefill_stage: str) -> None:
        """Generate the answer on the chat context, continuing after what the decision step already produced."""
        gen, text = a.generate(self.backend, list(prompt) + list(decided_tokens),
                               a.settings.max_answer_tokens - len(decided_tokens), lead=answer_start,
                               unquoted=True)
        a.count_answer(gen, prefill_stage)
        a.trace.answer, a.trace.stopped = text, gen.stopped


__all__ = ["ContextOverflowError", "Runtime"]
