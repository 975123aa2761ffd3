"""A question in one conversation of a user, answered from the turns of their other conversations.

A user's chats share their standing facts (``memory.user_facts``); a question about the past ("what was the
restaurant I mentioned?") needs the turn that said it, which may be in yesterday's chat. Pages, budgets and KV
caches stay per conversation, so the other conversations are not paged into this one: their embedded turns are
scored against the question in the shared FAISS index (``PageIndex.best_turn_cosines``: no conversation is loaded
to do it), and when the best of them matches the question better than this conversation's own best turn, that
conversation is opened and its own selector picks what to hand the answer (its ranking, excerpts and dates, as
a recall there would), given as notes that name their conversation. Every turn of theirs is embedded once, the
resident ones too (``Conversation``'s user recall does it when a conversation of the user has changed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..core.pager import Pager
from .index import PageIndex

CONVERSATIONS_WEIGHED = 3  # other conversations whose own ranking is asked before one is recalled from


@dataclass
class ForeignRecall:
    """Another conversation of the user to recall from: its pages and turns and its own selector."""

    conversation: str
    pager: Pager
    selector: Any  # its ``RerankSelector``
    dense: float  # its best turn's cosine with the question


class UserRecall:
    """The user's other conversations (``others``: their ids), ranked against a question by the cosine of their
    embedded turns; ``open`` gives one's pager and selector (the memory layer's)."""

    def __init__(self, index: PageIndex, others: Sequence[str], open: Callable[[str], tuple[Pager, Any]] | None = None):
        self.index = index
        self.others = list(others)
        self.open = open

    def conversation(self, question: str) -> ForeignRecall | None:
        """The other conversation to recall from, opened (None: none has a turn, or nothing opens them): of the
        ``CONVERSATIONS_WEIGHED`` whose best turns are closest to ``question`` by cosine, the one whose own
        ranking (dense and BM25 fused, as a recall there ranks) scores its best turn highest."""
        if self.open is None:
            return None
        found = []
        for dense, conv_id in self.closest(question)[:CONVERSATIONS_WEIGHED]:
            pager, selector = self.open(conv_id)
            ranked = selector.rank(question, pager)
            score = float(ranked[0].score) if len(ranked) else float("-inf")
            found.append((score, ForeignRecall(conv_id, pager, selector, dense)))
        return max(found, key=lambda pair: pair[0])[1] if found else None

    def closest(self, question: str) -> list[tuple[float, str]]:
        """(the best cosine of its embedded turns with ``question``, conversation) of every other conversation
        that has any, closest first: the one pass over all their turns (a forgotten turn has no vector)."""
        if not self.others:
            return []
        vector = self.index.embedder.encode_one(question)
        best = self.index.best_turn_cosines(self.others, vector)  # one pass over their turns' vectors
        return sorted(((cosine, conv_id) for conv_id, cosine in best.items()), reverse=True)
