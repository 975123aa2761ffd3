"""A user's standing facts across their conversations, the newest value winning across them too.

Each conversation keeps its own facts (``Store.facts``, each superseding the older ones of its slot within it). A
user's are all of theirs put in the order they were said and superseded again over the whole (``core.facts.
superseded``), so that a later conversation's "we live in Lyon now" replaces an earlier one's "I live in
Utrecht". What ``users.User.facts`` lists and what a user's conversation answers from (``Conversation.
fact_context``); reads the store only (no model, no conversation object), so both can use it.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from ..core.dates import parse_time
from ..core.facts import FACTS_VERSION, StandingFact, facts_of, superseded
from ..store.base import Store


def stored_facts(store: Store, conv_id: str) -> list[StandingFact]:
    """Every standing fact of a conversation: as stored, or made from its turns when an older extractor stored
    them (as ``Conversation.facts`` reads them, without writing)."""
    if store.facts_version(conv_id) == FACTS_VERSION:
        return store.facts(conv_id)
    return facts_of(store.turns(conv_id))


def across(store: Store, user: str) -> tuple[list[StandingFact], dict[tuple[str, int], tuple[str, int]]]:
    """The user's facts, each naming its conversation (``conv_id``) and, when replaced, the conversation of the
    fact that replaced it (``superseded_in``), in the order they were said; and {(conversation, fact id): the
    (conversation, fact id) that replaced it}."""
    per_conversation = [(info.id, store.conversation_record(info.id)["created_at"], stored_facts(store, info.id))
                        for info in store.list_conversations(user)]
    ordered = said_order(per_conversation)
    by = superseded(ordered, range(len(ordered)))
    replaced = {(f.conv_id, f.fact_id): (ordered[n].conv_id, ordered[n].fact_id)
                for i, f in enumerate(ordered) if (n := by.get(i)) is not None}
    out = [dataclasses.replace(f, superseded_by=newer[1], superseded_in=newer[0])
           if (newer := replaced.get((f.conv_id, f.fact_id))) is not None
           else dataclasses.replace(f, superseded_by=None, superseded_in=None) for f in ordered]
    return out, replaced


def said_order(conversations: Sequence[tuple[str, float, Sequence[StandingFact]]]) -> list[StandingFact]:
    """The facts of several conversations ((id, created_at, facts oldest first) each, the conversations oldest
    first), each naming its conversation, in the order they were said: by the time of its source turn (what
    ``Conversation.add_turn`` stamps, or what an ingested file gave; ISO 8601 or LoCoMo's), a fact whose turn has
    no time taking that of the fact before it in its conversation (the first ones: the first time the conversation
    has, else the moment it was stored). Within a conversation the order is always its own (a time earlier than
    the fact before it counts as that fact's); ties go to the conversation stored first, then the fact id."""
    keyed = []
    for rank, (conv_id, created, facts) in enumerate(conversations):
        moments = [_moment(f.time) for f in facts]
        known = [m for m in moments if m is not None]
        last = known[0] if known else created
        for f, moment in zip(facts, moments):
            last = max(last, moment) if moment is not None else last
            keyed.append(((last, rank, f.fact_id), dataclasses.replace(f, conv_id=conv_id)))
    return [f for _, f in sorted(keyed, key=lambda pair: pair[0])]


def _moment(value: str | None) -> float | None:
    """A turn's time as seconds since the epoch (a time without a zone is local time), or None."""
    when = parse_time(value)
    return when.timestamp() if when is not None else None
