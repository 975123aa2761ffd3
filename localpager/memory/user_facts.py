"""A user's standing facts across their conversations, the newest value winning across them too.

Each conversation keeps its own facts (``Store.facts``, each superseding the older ones of its slot within it). A
user's are all of theirs put in the order they were said and superseded again over the whole (``core.facts.
superseded``), so that a later conversation's "we live in Lyon now" replaces an earlier one's "I live in
Utrecht". What ``users.User.facts`` lists and what a user's conversation answers from (``Conversation.
fact_context``); reads the store only (no model, no conversation object), so both can use it.

Working the order and the supersessions out again over every fact of every conversation is most of the cost (70
ms for 50 conversations and 420 facts), while a user's facts rarely change from one question to the next: each
conversation's facts are kept with the generation they were read at (``Store.generation``, which every write to
a turn or a fact moves, in any process), and the result with the facts it was worked out from; a call reads the
generations, and the facts of a conversation whose generation moved, and works the order out again only when
some conversation's facts differ, or the conversations that have some (a new chat stating nothing changes none).
"""

from __future__ import annotations

import copy
import dataclasses
import threading
import weakref
from typing import Sequence

from ..core.dates import parse_time
from ..core.facts import FACTS_VERSION, StandingFact, superseded
from ..store.base import ConversationInfo, Store


def stored_facts(store: Store, conv_id: str) -> list[StandingFact]:
    """Every standing fact of a conversation: as stored, or made from its turns when an older extractor stored
    them (as ``Conversation.facts`` reads them, without writing)."""
    if store.facts_version(conv_id) == FACTS_VERSION:
        return store.facts(conv_id)
    return store.remade_facts(conv_id, store.turns(conv_id))


def across(store: Store, user: str, listed: Sequence[ConversationInfo] | None = None
           ) -> tuple[list[StandingFact], dict[tuple[str, int], tuple[str, int]]]:
    """The user's facts, each naming its conversation (``conv_id``) and, when replaced, the conversation of the
    fact that replaced it (``superseded_in``), in the order they were said; and {(conversation, fact id): the
    (conversation, fact id) that replaced it}. ``listed``: the user's conversations (``Store.list_conversations``),
    when the caller has just read them."""
    with _KNOWN_LOCK:
        known = _KNOWN.setdefault(store, {}).get(user) or _Known({}, None, None)
    per_conversation, read = [], {}
    for info in store.list_conversations(user) if listed is None else listed:
        generation = store.generation(info.id)  # first: the facts read after it are never older than it says
        held = known.facts.get(info.id)
        if held is None or held[0] != generation:
            held = (generation, store.conversation_record(info.id)["created_at"], stored_facts(store, info.id))
        read[info.id] = held
        if held[2]:  # one without facts adds nothing to the order (nor to any tie: the others keep theirs)
            per_conversation.append((info.id, held[1], held[2]))
    if known.result is not None and per_conversation == known.inputs:
        out, replaced = known.result
    else:
        out, replaced = _across(per_conversation)
    with _KNOWN_LOCK:
        _KNOWN[store][user] = _Known(read, per_conversation, (out, replaced))
    return [copy.copy(f) for f in out], dict(replaced)  # the caller's own: the kept ones never change


@dataclasses.dataclass(frozen=True)
class _Known:
    """What ``across`` last read of a user in a store: {conversation: (generation, created_at, its facts)}, the
    (id, created_at, facts) of each conversation the result was worked out from, and the result."""

    facts: dict[str, tuple[int, float, list[StandingFact]]]
    inputs: list | None
    result: tuple[list[StandingFact], dict] | None


_KNOWN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # store -> {user: _Known}
_KNOWN_LOCK = threading.Lock()


def _across(per_conversation: Sequence[tuple[str, float, Sequence[StandingFact]]]
            ) -> tuple[list[StandingFact], dict[tuple[str, int], tuple[str, int]]]:
    """``across``'s work on the conversations' (id, created_at, facts)."""
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
