"""What kind of answer a question asks for, and what kinds of fact a turn states.

Question answering systems have long matched a question's expected answer type with the entities a
passage holds: "how much can I spend" wants an amount, "who do I call" a person, "when" a date or a time.
A small embedding model often ranks a turn that shares the question's topic above the turn that holds its
answer ("Which snack should I keep away from at the party?" is nearer to "We're hosting a party. What
snacks are easy?" than to "I'm badly allergic to sesame"), so the ranking (``ranking.rank_turns``) gives a
turn that states a fact of the asked type a bonus.

Types: amounts of money, clock times, dates (written or relative: "last Friday"), people (a name, a
phone number, an e-mail), numbers (a room, a locker, a flight), quantities (a dose), medicines, things to
avoid (allergies, intolerances, what makes one ill) and likings (favourites, loves). The cues are words
of the language, not of any data set: they were written from what the types mean, then checked on
generated conversations and LoCoMo 1-5 (``benchmarks/recall_gate.py``), and are kept as data (``lexicon``:
``core/data/english.json``; English only). Stdlib only; each pattern is linear in the text and runs on at most
``_MAX_CHARS`` of it.
"""

from __future__ import annotations

import re
from functools import lru_cache

from . import lexicon

_MAX_CHARS = 2000

TYPES = ("money", "time", "date", "person", "place", "number", "quantity", "medicine", "avoid", "liking")

# -- what a question asks for -------------------------------------------------------------------------
# Each cue asks for one of a few types: "when" is answered by a date or a time, "where" by a place or a
# number (a locker, a parking bay), "how much" by an amount, a quantity or a number. A question holding
# several cues asks for each ("which medicine must I never take": a medicine, and something to avoid).
_ASKS: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = tuple(
    (lexicon.pattern(f"asks_{cue}"), frozenset(types)) for cue, types in (
        ("money", {"money"}), ("amount", {"money", "quantity", "number"}), ("when", {"date", "time"}),
        ("time", {"time"}), ("date", {"date"}), ("person", {"person"}), ("place", {"place", "number"}),
        ("number", {"number"}), ("medicine", {"medicine"}), ("avoid", {"avoid"}), ("liking", {"liking"})))

# -- what a turn states -------------------------------------------------------------------------------
_STATES = {name: lexicon.pattern(f"states_{name}") for name in TYPES}  # "states_money", ...


@lru_cache(maxsize=4096)
def asked_groups(question: str) -> tuple[frozenset[str], ...]:
    """What ``question`` asks for: for each of its cues, the types that would answer it."""
    text = question[:_MAX_CHARS]
    return tuple(dict.fromkeys(types for pattern, types in _ASKS if pattern.search(text)))


def asked_types(question: str) -> frozenset[str]:
    """Every type that would answer one of ``question``'s cues (empty for a question that names none)."""
    return frozenset().union(*asked_groups(question))


@lru_cache(maxsize=1 << 16)
def stated_types(text: str) -> frozenset[str]:
    """The fact types ``text`` states."""
    text = text[:_MAX_CHARS]
    return frozenset(name for name, pattern in _STATES.items() if pattern.search(text))


def match(question: str, text: str) -> float:
    """The share of the types ``question`` asks for that ``text`` states (0 when it asks for none):
    "Which medicine must a doctor never prescribe me?" asks for a medicine to avoid, and "I'm allergic to
    penicillin" states both, "I take lisinopril" one of the two."""
    groups = asked_groups(question)
    if not groups:
        return 0.0
    stated = stated_types(text)
    return sum(bool(group & stated) for group in groups) / len(groups)


_SEVERAL = lexicon.pattern("several")


def asks_for_several(question: str) -> bool:
    """Whether ``question`` asks for more than one thing: "both", "how many", "what books has she read",
    "where has she camped" (a list is the answer, and one turn seldom holds all of it)."""
    return bool(_SEVERAL.search(question[:_MAX_CHARS]))


_PAST_WHEN = lexicon.pattern("past_when")
_WHEN_TOLD = lexicon.pattern("when_told")


def asks_when(question: str) -> bool:
    """Whether ``question`` asks for a date ("when did…", "what day…", "by when…"), not a duration."""
    return any("date" in group for group in asked_groups(question))


def asks_when_told(question: str) -> bool:
    """Whether ``question`` asks when its speaker said something ("When did I mention my plumber?"): the answer is
    the day they said it, not a day their words speak of ("... she fixed the boiler last year")."""
    return bool(_WHEN_TOLD.search(question[:_MAX_CHARS]))


def asks_when_past(question: str) -> bool:
    """Whether ``question`` asks when something happened ("when did…", "how long ago…"): then the day a
    turn telling of it was said is an answer, when the turn names no other."""
    return bool(_PAST_WHEN.search(question[:_MAX_CHARS]))

