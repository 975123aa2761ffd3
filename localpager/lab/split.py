"""The eval's split mode (issue 40): each conversation told over several chats of one user, its questions asked in
a new chat of theirs.

Chat apps open a new conversation every day, so what a user asks today was said in other conversations. Split
mode stores each evaluated conversation as ``k`` conversations of one user (``<id>#1`` .. ``<id>#k``: a LoCoMo
conversation cut at its sessions, a generated one at exchanges, each part about as long) and asks every probe at the
end in a new, empty conversation of that user (``<id>#new``), which knows only what the user's memory across chats
gives it (``memory.user_facts``, ``retrieval.user_recall``). The same probes asked inside the unsplit conversation
are the figure to compare with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..core.records import Turn

ASKING = "new"  # the suffix of the conversation the questions are asked in


@dataclass
class Part:
    """One chat of a split conversation: its id and the global turn indices it holds (``start`` to ``stop``)."""

    conv_id: str
    start: int
    stop: int


def cut_points(turns: Sequence[Turn], k: int) -> list[int]:
    """Where ``k`` parts of about one length begin (after the first, which begins at 0): at a session's start (a
    turn whose time differs from the one before, as LoCoMo's sessions do) when the turns have times, else at an
    exchange's start (a user turn after an assistant one); the ``k - 1`` such starts nearest to even shares."""
    if k < 2 or len(turns) < 2:
        return []
    timed = any(t.time for t in turns)
    starts = [i for i in range(1, len(turns))
              if (turns[i].time != turns[i - 1].time if timed else
                  turns[i].role == "user" and turns[i - 1].role != "user")]
    chosen: list[int] = []
    for share in range(1, k):
        target = share * len(turns) / k
        free = [s for s in starts if s not in chosen and (not chosen or s > chosen[-1])]
        if free:
            chosen.append(min(free, key=lambda s: abs(s - target)))
    return chosen


def parts(conv_id: str, turns: Sequence[Turn], k: int) -> list[Part]:
    """The chats ``turns`` are told over: ``k`` (fewer when there are not enough places to cut)."""
    bounds = [0, *cut_points(turns, k), len(turns)]
    return [Part(f"{conv_id}#{n}", a, b) for n, (a, b) in enumerate(zip(bounds, bounds[1:]), start=1) if b > a]


def part_of(split: Sequence[Part], turn: int) -> tuple[Part, int]:
    """The part holding global turn ``turn``, and the turn's index in it."""
    for part in split:
        if part.start <= turn < part.stop:
            return part, turn - part.start
    raise IndexError(f"turn {turn} is in no part")
