"""A question in one conversation of a user, answered from the turns of their other conversations.

A user's chats share their standing facts (``memory.user_facts``); a question about the past ("what was the
restaurant I mentioned?") needs the turn that said it, which may be in yesterday's chat. Pages, budgets and KV
caches stay per conversation, so the other conversations are not paged into this one: their embedded turns are
scored against the question in the shared FAISS index (``PageIndex.all_turn_cosines``: no conversation is loaded
to do it), and the best ones are handed to the answer as notes naming their conversation and day, when they
match the question better than this conversation's own best turn. Every turn of theirs is embedded once, the
resident ones too (``Conversation``'s user recall does it when a conversation of the user has changed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..core.records import Turn
from ..store.base import Store
from .index import PageIndex

FOREIGN_TURNS = 2  # turns of other conversations an answer is given at most


@dataclass
class ForeignHit:
    """A turn of another conversation of the same user, with its cosine with the question."""

    conversation: str
    turn: Turn
    dense: float


class UserRecall:
    """The user's other conversations (``others``: their ids), ranked against a question by the cosine of their
    embedded turns."""

    def __init__(self, index: PageIndex, store: Store, others: Sequence[str]):
        self.index = index
        self.store = store
        self.others = list(others)

    def best(self, question: str, limit: int = FOREIGN_TURNS) -> list[ForeignHit]:
        """The best ``limit`` turns of the other conversations (with text: a forgotten turn has none), best
        first."""
        if not self.others:
            return []
        vector = self.index.embedder.encode_one(question)
        scored: list[tuple[float, str, int]] = []
        for conv_id in self.others:
            turns, cosines = self.index.all_turn_cosines(conv_id, vector)
            for k in np.argsort(-cosines)[: limit * 2]:
                scored.append((float(cosines[k]), conv_id, int(turns[k])))
        scored.sort(key=lambda s: -s[0])
        hits: list[ForeignHit] = []
        loaded: dict[str, list[Turn]] = {}
        for dense, conv_id, index in scored:
            if len(hits) >= limit:
                break
            turns = loaded.setdefault(conv_id, self.store.turns(conv_id))
            if index < len(turns) and turns[index].text:
                hits.append(ForeignHit(conv_id, turns[index], dense))
        return hits
