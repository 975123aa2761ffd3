"""The user's own hand on their standing facts, as chat apps with a memory give it: remember a fact without a
reply, change a fact's words, delete one.

A standing fact is the user's words in a turn (``core.facts``), so each of these is a change to the turns:

- *remember* stores the words as a user turn marked ``remembered`` (``Turn.remembered``), with no reply after it
  and no model asked: it becomes standing facts as any turn does, and is one fact of kind ``stated`` when the
  extractor finds none in it. The mark is kept with the turn, so a rebuild of the facts, an export and an import
  keep it; a forget erases it as any turn.
- *delete* erases the fact's words as ``forget`` erases text (``controls.forget_turns``): its source turn is
  forgotten whole (a turn is forgotten whole or not at all), and so is every turn that holds its words as words
  (the answers that quoted it, ``You told me: "…"``), with their vectors, bookmark words, traces and KV caches, in
  its conversation and, for a user's conversation, in every other conversation of that user (an answer there may
  have quoted it: a user's facts are in all their prompts). The source turn's other standing facts that still
  stand are stated again, each as a remembered turn at its old time, so that deleting one fact takes no other;
  what else the turn said that was no standing fact goes with it.
- *edit* is a delete, then a remember of the new words.

``Conversation.correct`` is not reused: it keeps the corrected turn (marked superseded), and its old words with it.
``Conversation.remember``, ``edit_fact`` and ``delete_fact`` do the changes; what they take is worked out here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from ..core.checks import check_text
from ..core.facts import StandingFact
from .controls import ForgetReport

if TYPE_CHECKING:
    from ..core.pager import Pager


@dataclass
class FactChange:
    """What an edit or a delete of a standing fact did (or, with ``dry_run``, would do): the fact as it was, the
    new words (``text``; None for a delete) and the facts they made, the source turn's other facts stated again
    (``kept``; with ``dry_run``, those that would be), and the erasures, one ``ForgetReport`` per conversation they
    reached (the fact's own first)."""

    conversation: str
    fact: StandingFact
    text: str | None = None
    facts: list[StandingFact] = field(default_factory=list)
    kept: list[StandingFact] = field(default_factory=list)
    reports: list[ForgetReport] = field(default_factory=list)
    dry_run: bool = False

    @property
    def rewrite_pending(self) -> bool:
        """Some store file still holds the erased words: another process was reading the store."""
        return any(r.rewrite_pending for r in self.reports)

    def to_dict(self) -> dict:
        return {"conversation": self.conversation, "fact": self.fact.to_dict(), "text": self.text,
                "facts": [f.to_dict() for f in self.facts], "kept": [f.to_dict() for f in self.kept],
                "dry_run": self.dry_run, "rewrite_pending": self.rewrite_pending,
                "forgotten": [r.to_dict() for r in self.reports]}

    def lines(self) -> list[str]:
        verb = ("would change" if self.text is not None else "would delete") if self.dry_run else (
            "changed" if self.text is not None else "deleted")
        out = [f"{verb} standing fact #{self.fact.fact_id} of {self.conversation}: {self.fact.text}"]
        for report in self.reports:
            out += ["  " + line for line in report.lines()]
        again = "would state again" if self.dry_run else "stated again"
        out += [f"  {again} (another fact of the same turn): {f.text}" for f in self.kept]
        if self.text is not None:
            out += [f"  now: {f.line()}" for f in self.facts] if not self.dry_run else [f"  new words: {self.text}"]
        return out


@dataclass
class Erasure:
    """What erasing a fact's words takes in its conversation: the fact, the source turn's other facts to state
    again (those still standing that do not hold its words) and the turns to forget."""

    fact: StandingFact
    kept: list[StandingFact]
    turns: list[int]

    @property
    def words(self) -> str:
        return words_of(self.fact)


def erasure(every: Sequence[StandingFact], pager: Pager, fact_id: int, conv_id: str) -> Erasure:
    """What erasing standing fact ``fact_id`` of a conversation (its facts ``every``, ``all=True``; its ``pager``)
    takes; an unknown id is a ``ValueError``."""
    fact = next((f for f in every if f.fact_id == fact_id), None)
    if fact is None:
        raise ValueError(f"no standing fact {fact_id} in conversation {conv_id!r}")
    needle = words_of(fact)
    kept = [f for f in every if f.turn == fact.turn and f.fact_id != fact_id and f.current
            and not holds(f.text, needle)]
    return Erasure(fact, kept, sorted({fact.turn} | set(holding(pager, needle))))


def holding(pager: Pager, needle: str) -> list[int]:
    """The turns (not forgotten) that hold ``needle`` as words (``holds``)."""
    return [t.index for t in pager.turns if t.text and holds(t.text, needle)]


def words_of(fact: StandingFact) -> str:
    """The words a fact's erasure looks for: its line, less the ``…`` a long one was cut with."""
    return fact.text.rstrip("…").strip()


def holds(text: str, needle: str) -> bool:
    """``needle`` stands in ``text`` as words (any case), not inside a longer word: a fact "Tea." erases the turns
    that say "tea.", not those that say "steak."."""
    if not needle:
        return False
    return re.search(rf"(?<!\w){re.escape(needle)}(?!\w)", text, re.IGNORECASE) is not None


def check_words(text: str, empty: str) -> None:
    """``text`` is storable and holds some words, or a ``ValueError`` (``empty`` when it holds none)."""
    check_text(text)
    if not isinstance(text, str) or not text.strip():
        raise ValueError(empty)
