"""Page boundary policies: where one page ends and the next begins.

Every policy decides turn by turn, looking only backwards, so pages that are already closed never
change when the conversation grows. That keeps bookmarks, and so the prompt prefix, stable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol, Sequence

from .choices import PARAMETRIC_BOUNDARIES, Boundary, unknown
from .records import Turn
from .text import content_words


class BoundaryPolicy(Protocol):
    name: str

    def starts_page(self, turns: Sequence[Turn], i: int, page_start: int) -> bool:
        """Whether turn ``i`` opens a new page, given that the open page began at ``page_start``."""


@dataclass(frozen=True)
class FixedTurns:
    """A new page every ``size`` turns."""

    size: int

    @property
    def name(self) -> str:
        return f"fixed_{self.size}"

    def starts_page(self, turns: Sequence[Turn], i: int, page_start: int) -> bool:
        return i - page_start >= self.size


@dataclass(frozen=True)
class Exchanges:
    """A new page every ``size`` user–assistant exchanges; an exchange opens at a user turn."""

    size: int

    @property
    def name(self) -> str:
        return f"exchange_{self.size}"

    def starts_page(self, turns: Sequence[Turn], i: int, page_start: int) -> bool:
        if turns[i].role != "user":
            return False
        opened = sum(1 for t in turns[page_start:i] if t.role == "user")
        return opened >= self.size


@dataclass(frozen=True)
class TopicShift:
    """A new page when a turn shares few words with the turns just before it.

    Overlap is the Jaccard index of the turn's content words with those of the previous ``window``
    turns of the page. ``min_turns`` avoids one-line pages from short replies ("ok!") and
    ``max_turns`` bounds a page when the topic never moves.
    """

    threshold: float = 0.05
    window: int = 5
    min_turns: int = 4
    max_turns: int = 30

    @property
    def name(self) -> str:
        return "topic_shift"

    def starts_page(self, turns: Sequence[Turn], i: int, page_start: int) -> bool:
        size = i - page_start
        if size >= self.max_turns:
            return True
        if size < self.min_turns:
            return False
        current = set(content_words(turns[i].text))
        if not current:
            return False
        previous: set[str] = set()
        for turn in turns[max(page_start, i - self.window) : i]:
            previous.update(content_words(turn.text))
        union = current | previous
        return len(current & previous) / len(union) < self.threshold


_NAME = re.compile(r"^(fixed|exchange)_(\d+)$")


def get_boundary(name: str) -> BoundaryPolicy:
    """The policy called ``name``: one of ``Boundary``, or ``fixed_N`` / ``exchange_N`` for any N."""
    if name == Boundary.TOPIC_SHIFT:
        return TopicShift()
    match = _NAME.match(name) if isinstance(name, str) else None
    if match and int(match.group(2)) > 0:
        size = int(match.group(2))
        return FixedTurns(size) if match.group(1) == "fixed" else Exchanges(size)
    raise unknown("boundary policy", name, [*Boundary, *PARAMETRIC_BOUNDARIES])


def split_pages(turns: Sequence[Turn], policy: BoundaryPolicy) -> list[range]:
    """The turn ranges of the pages ``policy`` makes of ``turns``, in order."""
    ranges: list[range] = []
    start = 0
    for i in range(1, len(turns)):
        if policy.starts_page(turns, i, start):
            ranges.append(range(start, i))
            start = i
    if turns:
        ranges.append(range(start, len(turns)))
    return ranges
