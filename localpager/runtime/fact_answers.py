"""The answers of the long-term layer: from the standing facts that bear on a message, and the overview that
answers "what do you remember about me?".

Both run before any recall: a standing fact is what the user said stays true, and an overview is a list a user
can check and correct, written out without the model.
"""

from __future__ import annotations

import time
from typing import Sequence

from ..backends.base import ChatBackend
from ..core.facts import StandingFact
from .answering import Answering, elapsed_ms
from .choices import Layout, RecallMode
from .prompts import answer_messages, fact_lead, fact_turn, overview_text, recent_exchange, turn_line
from .prefixes import kept_parts
from .selector import FactMatch
from .trace import Citation

STANDING_FACT = "standing fact"  # a citation's label: the answer was given this standing fact
OVERVIEW_FACTS = 12  # standing facts an overview lists at most


def overview_facts(facts: Sequence[StandingFact]) -> list[StandingFact]:
    """The standing facts an overview lists: pinned first, then the newest, at most ``OVERVIEW_FACTS``."""
    return sorted(facts, key=lambda f: (not f.pinned, -f.fact_id))[:OVERVIEW_FACTS]


def answer_overview(a: Answering) -> None:
    """What is remembered, listed: the standing facts (pinned first, then the newest) and the topics of the
    most recent evicted pages, written out as they are, with no model."""
    chosen = overview_facts(a.facts.current)
    text = overview_text(chosen, a.facts.recent)
    a.say(text)
    a.trace.decision, a.trace.answer, a.trace.stopped = "overview", text, "eos"
    a.trace.citations = [_citation(a, f, used=True) for f in chosen]


def fact_hits(a: Answering) -> list[FactMatch]:
    """The standing facts the selector judges to bear on the question (none without memory)."""
    s = a.settings
    if not s.facts or s.mode in (RecallMode.NEVER, RecallMode.ALWAYS):
        return []  # never: no memory; always: a recall is forced, what a standing fact would answer too
    start = time.perf_counter()
    hits = list(a.selector.facts_for(a.question))
    a.trace.timings_ms["rerank"] += elapsed_ms(start)
    a.trace.facts = [h.to_dict() for h in hits]
    return hits


def answer_from_facts(a: Answering, hits: Sequence[FactMatch], backend: ChatBackend) -> None:
    """Answer from the standing facts judged to bear on the question, in the focused layout on ``backend`` (the
    context that answers recalls): they are the notes, and with ``fact_lead`` the answer begins by quoting the
    best of them, so even a tiny model's answer carries what the user said."""
    s, trace = a.settings, a.trace
    layout = Layout.FOCUSED if s.layout == Layout.INLINE else s.layout
    start = time.perf_counter()
    recent = recent_exchange(a.messages, layout)
    notes = "\n".join(turn_line(fact_turn(h.fact)) for h in hits)
    answer_prompt = backend.render(answer_messages(layout, notes, a.question, recent))
    lead = fact_lead(hits[0].fact) if s.fact_lead else ""
    prompt = list(answer_prompt) + (backend.tokenize(lead) if lead else [])
    trace.timings_ms["recall_fetch"] += elapsed_ms(start)
    keep = kept_parts(backend, layout, notes, recent, answer_prompt)
    gen, text = a.generate(backend, prompt, s.max_answer_tokens, lead=lead, keep=keep, apart=True)
    a.count_answer(gen, "injection_prefill")
    trace.tokens["answer_prompt"] = gen.prompt_tokens
    trace.decision, trace.answer, trace.stopped = "fact", text, gen.stopped
    trace.citations = [_citation(a, h.fact) for h in hits]
    trace.cite(text)


def _citation(a: Answering, fact: StandingFact, used: bool = False) -> Citation:
    return Citation(page_id=a.pager.page_of_turn(fact.turn).page_id, turn=fact.turn, text=fact.text,
                    speaker=fact.speaker or "user", time=fact.time, label=STANDING_FACT, used=used)
