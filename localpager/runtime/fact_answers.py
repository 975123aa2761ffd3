"""The answers of the long-term layer: from the standing facts that bear on a message, and the overview that
answers "what do you remember about me?".

Both run before any recall: a standing fact is what the user said stays true, and an overview is a list a user
can check and correct, written out without the model.
"""

from __future__ import annotations

import time
from typing import Sequence

from ..backends.base import ChatBackend
from ..core.facts import StandingFact, extract
from ..core.records import Turn
from ..core.text import is_question
from .answering import Answering, elapsed_ms
from .choices import Layout, RecallMode
from .prompts import answer_messages, fact_lead, fact_turn, overview_text, recent_exchange, turn_line
from .prefixes import kept_parts
from .selector import FactMatch
from .trace import Citation

STANDING_FACT = "standing fact"  # a citation's label: the answer was given this standing fact
OVERVIEW_FACTS = 12  # standing facts an overview lists at most


def overview_facts(facts: Sequence[StandingFact]) -> list[StandingFact]:
    """The standing facts an overview lists: pinned first, then the newest, at most ``OVERVIEW_FACTS`` (``facts``
    in the order they were said: one conversation's by id, a user's across conversations by time)."""
    order = sorted(range(len(facts)), key=lambda i: (not facts[i].pinned, -i))
    return [facts[i] for i in order[:OVERVIEW_FACTS]]


def answer_overview(a: Answering) -> None:
    """What is remembered, listed: the current standing facts (pinned first, then the newest), quoted as said and
    written out with no model: a list a user can check and correct."""
    chosen = overview_facts(a.facts.current)
    text = overview_text(chosen)
    a.say(text)
    a.trace.decision, a.trace.answer, a.trace.stopped = "overview", text, "eos"
    a.trace.citations = [_citation(a, f, used=True) for f in chosen]


def fact_hits(a: Answering) -> list[FactMatch]:
    """The standing facts the selector judges to bear on the question (none without memory, and none for a message
    that neither asks, sets a task nor requests something told: "I also like the Lisbon flight." or "My new door
    code is 7730." is told, not asked, and quoting a fact, the one it replaces or itself, would answer nothing)."""
    s = a.settings
    if not s.facts or s.mode in (RecallMode.NEVER, RecallMode.ALWAYS):
        return []  # never: no memory; always: a recall is forced, what a standing fact would answer too
    asks = is_question(a.question) or a.selector.is_task(a.question) or a.selector.asks_about_self(a.question)
    if not asks or (not is_question(a.question) and extract(Turn(role="user", text=a.question, index=-1))):
        return []
    start = time.perf_counter()
    hits = list(a.selector.facts_for(a.question))
    a.trace.timings_ms["rerank"] += elapsed_ms(start)
    a.trace.facts = [h.to_dict() for h in hits]
    return hits


def answer_from_facts(a: Answering, hits: Sequence[FactMatch], backend: ChatBackend) -> None:
    """Answer from the standing facts judged to bear on the question. With ``fact_lead`` a question is answered
    with them quoted, the best first ("You told me: ..."), written out with no model: what the user said, and nothing
    a small model would add after it (a tail such as "I'm not sure I'm ready to discuss that." read as part of the
    memory). A task ("write a note introducing my dog") needs the model's work: the quote, then what the model
    writes in the focused layout on ``backend`` (the context that answers recalls), the facts as its notes, as a
    sentence of its own; without ``fact_lead``, that alone."""
    s, trace = a.settings, a.trace
    trace.decision = "fact"
    trace.citations = [_citation(a, h.fact) for h in hits]
    lead = fact_lead(*(h.fact for h in hits)) if s.fact_lead else ""
    if lead and not a.selector.is_task(a.question):
        trace.answer, trace.stopped = lead, "eos"
        a.say(trace.answer)
    else:
        trace.answer, trace.stopped = _generated(a, hits, backend, lead)
    trace.cite(trace.answer)


def _generated(a: Answering, hits: Sequence[FactMatch], backend: ChatBackend, lead: str) -> tuple[str, str]:
    s, trace = a.settings, a.trace
    layout = Layout.FOCUSED if s.layout == Layout.INLINE else s.layout
    start = time.perf_counter()
    recent = recent_exchange(a.messages, layout)
    notes = "\n".join(turn_line(fact_turn(h.fact)) for h in hits)
    # the quote is sent first but is not in the prompt: after a whole quote the model's turn reads as done, and
    # SmolLM2 ended it at once for 6 of 7 tasks (no work at all); the fact is in its notes
    prompt = backend.render(answer_messages(layout, notes, a.question, recent))
    trace.timings_ms["recall_fetch"] += elapsed_ms(start)
    gen, text = a.generate(backend, prompt, s.max_answer_tokens, lead=lead, apart=True,
                           keep=kept_parts(backend, layout, notes, recent, prompt))
    a.count_answer(gen, "injection_prefill")
    trace.tokens["answer_prompt"] = gen.prompt_tokens
    return text, gen.stopped


def _citation(a: Answering, fact: StandingFact, used: bool = False) -> Citation:
    """Where ``fact`` was said: a page of this conversation, or (``conv_id`` set: ``FactContext``) another
    conversation of the same user."""
    page = None if fact.conv_id is not None else a.pager.page_of_turn(fact.turn).page_id
    return Citation(page_id=page, turn=fact.turn, text=fact.text, speaker=fact.speaker or "user", time=fact.time,
                    label=STANDING_FACT, used=used, conversation=fact.conv_id)
