"""Plain records shared by every part of localpager.

They carry no behaviour beyond rendering, so the store, the pager, the loaders and the
evaluation can exchange them without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

ROLES = ("user", "assistant")
GENERAL_PROBE = "general"  # a probe's type: a question that needs nothing said before (no answer, no evidence)
# a probe's type: a question about something never said (no answer, no evidence): the right reply is that it is
# not remembered
ABSENT_PROBE = "absent"
UNANSWERED_PROBES = (GENERAL_PROBE, ABSENT_PROBE)  # the probe types that carry no answer


@dataclass
class Turn:
    """One message of a conversation; ``index`` is its 0-based position."""

    role: str
    text: str
    index: int
    time: str | None = None
    speaker: str | None = None  # a display name (LoCoMo), when the source has one
    # the index of the later turn that corrected this one (Conversation.correct); None: current
    superseded_by: int | None = None
    # stored by ``Conversation.remember``: the speaker asked that it be kept, so it is a standing fact even when
    # the extractor finds none in it (``core.facts.extract``); no reply follows it
    remembered: bool = False

    @property
    def forgotten(self) -> bool:
        """A forgotten turn keeps its place (indices, pages) but not its text."""
        return not self.text

    @property
    def by_person(self) -> bool:
        """Said by a person: a user's turn, or any named speaker's in a transcript; not a chat assistant's reply."""
        return self.role != "assistant" or bool(self.speaker)

    def render(self) -> str:
        """The line this turn contributes to a page's text."""
        who = self.speaker or self.role
        return f"{who}: {self.text}"


@dataclass
class Page:
    """A run of consecutive turns that is paged in and out as one unit.

    ``page_id`` is a small integer per conversation so that it reads well in a prompt (``p3``).
    """

    page_id: int
    first_turn: int
    last_turn: int  # inclusive
    text: str = ""
    token_count: int = 0
    keywords: list[str] = field(default_factory=list)
    access_count: int = 0
    last_access: int = -1  # turn index of the last use; -1 = never used since creation
    pinned: bool = False
    evicted: bool = False
    keywords_by: str = ""  # the strategy that chose ``keywords`` (a model strategy replaces its fallback's)
    worth: bool | None = None  # worth remembering long-term, as judged when the page closed; None: not judged

    @property
    def turn_range(self) -> range:
        return range(self.first_turn, self.last_turn + 1)

    def holds(self, turn_index: int) -> bool:
        return self.first_turn <= turn_index <= self.last_turn


@dataclass
class Probe:
    """A question about a conversation with the answers that count as right.

    ``evidence`` holds 0-based turn indices; ``at`` is the turn index after which the probe is
    asked (``None``: at the end).
    """

    question: str
    answers: list[str]
    evidence: list[int] = field(default_factory=list)
    type: str | None = None
    at: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Transcript:
    """A conversation as read from a file (its turns and probes), before it is paged or stored.

    Not ``api.Conversation``, the live conversation of a store that answers questions."""

    id: str
    turns: list[Turn]
    probes: list[Probe] = field(default_factory=list)
    source: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def newest(turns: Sequence[Turn], index: int) -> int:
    """The turn that currently states what turn ``index`` stated (itself when never corrected): recall and
    the memory controls both follow ``superseded_by``."""
    seen = set()
    while turns[index].superseded_by is not None and index not in seen:
        seen.add(index)
        index = turns[index].superseded_by
    return index
