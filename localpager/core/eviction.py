"""Eviction policies: which resident page leaves the prompt first.

A policy only orders candidates; the pager decides how many leave (watermarks) and which pages may
never leave (pinned pages and the newest page).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

from .choices import Eviction, choose
from .records import Page, Turn
from .text import is_small_talk


@dataclass
class EvictionContext:
    """What a policy may look at beyond the candidates: the conversation so far (its last turn is the
    new one) and how many tokens the pager must free."""

    turns: Sequence[Turn] = ()
    tokens_to_free: int = 0


class EvictionPolicy(Protocol):
    name: str

    def order(self, candidates: Sequence[Page], now: int, context: EvictionContext | None = None) -> list[Page]:
        """``candidates`` in the order they should be evicted; ``now`` is the current turn index."""


def last_use(page: Page) -> int:
    """When a page was last used: its last access, or its creation (its last turn) if never used."""
    return max(page.last_access, page.last_turn)


class FIFO:
    name = Eviction.FIFO

    def order(self, candidates: Sequence[Page], now: int, context: EvictionContext | None = None) -> list[Page]:
        return sorted(candidates, key=lambda p: p.page_id)


class LRU:
    name = Eviction.LRU

    def order(self, candidates: Sequence[Page], now: int, context: EvictionContext | None = None) -> list[Page]:
        return sorted(candidates, key=lambda p: (last_use(p), p.page_id))


class LFU:
    name = Eviction.LFU

    def order(self, candidates: Sequence[Page], now: int, context: EvictionContext | None = None) -> list[Page]:
        return sorted(candidates, key=lambda p: (p.access_count, last_use(p), p.page_id))


@dataclass
class Hybrid:
    """Frequency that decays with age: a page used often long ago ranks like one used once lately.

    score = (1 + accesses) * 0.5 ** (turns since last use / half_life); the lowest leaves first.
    """

    half_life: float = 40.0
    name: str = Eviction.HYBRID

    def score(self, page: Page, now: int) -> float:
        age = max(0, now - last_use(page))
        return (1 + page.access_count) * 0.5 ** (age / self.half_life)

    def order(self, candidates: Sequence[Page], now: int, context: EvictionContext | None = None) -> list[Page]:
        return sorted(candidates, key=lambda p: (self.score(p, now), p.page_id))


def is_small_talk_page(page: Page, turns: Sequence[Turn]) -> bool:
    """Every turn of the page is a greeting or an acknowledgement: nothing to keep."""
    return all(is_small_talk(turns[i].text) for i in page.turn_range if i < len(turns))


# Given (candidate page, one-line description) pairs and the new user turn, the ids of pages that can leave.
EvictionAdvisor = Callable[[Sequence[tuple[Page, str]], str], list[int]]


@dataclass
class Cooperative:
    """The model names the resident pages that can leave, in one call for the whole batch.

    Order: small-talk pages first (a rule, no model call), then the pages the model named, then the
    rest in ``fallback`` order. The model is asked only when small talk alone does not free enough, and
    only about candidates, so it can never evict a pinned page or the newest one. Without an advisor
    (no model loaded, the simulator) only the rule and the fallback apply.
    """

    advisor: EvictionAdvisor | None = None
    fallback: EvictionPolicy = field(default_factory=FIFO)
    describe: Callable[[Page], str] = lambda page: ", ".join(page.keywords) or page.text[:80]
    name: str = Eviction.COOPERATIVE

    def order(self, candidates: Sequence[Page], now: int, context: EvictionContext | None = None) -> list[Page]:
        context = context or EvictionContext()
        rest = self.fallback.order(candidates, now, context)
        chatter = [p for p in rest if is_small_talk_page(p, context.turns)]
        rest = [p for p in rest if p not in chatter]
        freed = sum(p.token_count for p in chatter)
        named: list[Page] = []
        if self.advisor is not None and rest and freed < context.tokens_to_free:
            question = context.turns[-1].text if context.turns else ""
            ids = set(self.advisor([(p, self.describe(p)) for p in rest], question))
            named = [p for p in rest if p.page_id in ids]
        return chatter + named + [p for p in rest if p not in named]


POLICIES: dict[Eviction, type] = {Eviction.FIFO: FIFO, Eviction.LRU: LRU, Eviction.LFU: LFU, Eviction.HYBRID: Hybrid,
                                  Eviction.COOPERATIVE: Cooperative}


def get_eviction(name: str) -> EvictionPolicy:
    """A fresh policy called ``name`` (one of ``Eviction``)."""
    return POLICIES[choose(Eviction, name, "eviction policy")]()
