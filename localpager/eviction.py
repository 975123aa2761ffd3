"""Eviction policies: which resident page leaves the prompt first.

A policy only orders candidates; the pager decides how many leave (watermarks) and which pages may
never leave (pinned pages and the newest page).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from .records import Page

DEFAULT_EVICTION = "fifo"


class EvictionPolicy(Protocol):
    name: str

    def order(self, candidates: Sequence[Page], now: int) -> list[Page]:
        """``candidates`` in the order they should be evicted; ``now`` is the current turn index."""


def last_use(page: Page) -> int:
    """When a page was last used: its last access, or its creation (its last turn) if never used."""
    return max(page.last_access, page.last_turn)


class FIFO:
    name = "fifo"

    def order(self, candidates: Sequence[Page], now: int) -> list[Page]:
        return sorted(candidates, key=lambda p: p.page_id)


class LRU:
    name = "lru"

    def order(self, candidates: Sequence[Page], now: int) -> list[Page]:
        return sorted(candidates, key=lambda p: (last_use(p), p.page_id))


class LFU:
    name = "lfu"

    def order(self, candidates: Sequence[Page], now: int) -> list[Page]:
        return sorted(candidates, key=lambda p: (p.access_count, last_use(p), p.page_id))


@dataclass
class Hybrid:
    """Frequency that decays with age: a page used often long ago ranks like one used once lately.

    score = (1 + accesses) * 0.5 ** (turns since last use / half_life); the lowest leaves first.
    """

    half_life: float = 40.0
    name: str = "hybrid"

    def score(self, page: Page, now: int) -> float:
        age = max(0, now - last_use(page))
        return (1 + page.access_count) * 0.5 ** (age / self.half_life)

    def order(self, candidates: Sequence[Page], now: int) -> list[Page]:
        return sorted(candidates, key=lambda p: (self.score(p, now), p.page_id))


POLICIES: dict[str, type] = {"fifo": FIFO, "lru": LRU, "lfu": LFU, "hybrid": Hybrid}


def get_eviction(name: str) -> EvictionPolicy:
    try:
        return POLICIES[name]()
    except KeyError:
        raise ValueError(f"unknown eviction policy {name!r}; use one of {', '.join(POLICIES)}") from None
