"""The words of the language the cues are written in, kept as data (``core/data/english.json``), and the one loader.

The standing-facts layer (``facts``), the answer types (``answer_types``) and the features of how a message asks
(``retrieval.gate``, ``retrieval.facts``) find what a sentence says by words of the language: "allergic", "every
Monday", "by the way", "how much", "remind me". Those words are lists in one data file, not
regular expressions across modules; this module reads the file once and builds the patterns from it. Each entry
says what it matches (``about``) and holds its ``words`` (the alternatives, each a regular-expression fragment:
``allerg\\w*``, ``tablets?``) and, when it is more than a list of whole words, its ``pattern`` text, in which
``<words>`` stands for the entry's words as one group and ``<name>`` for another entry (its pattern, or its words
as one group). An entry without a pattern matches any of its words as a whole word: ``\\b(?:a|b|c)\\b``. Patterns
ignore case unless the entry is ``case_sensitive``. English only: another language would need a file of its own.
Stdlib only.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources

DATA = "english.json"
_PLACEHOLDER = re.compile(r"<([a-z][a-z0-9_]*)>")


@cache
def entries() -> dict[str, dict]:
    """Every entry of the data file, by name (read once)."""
    text = resources.files(__package__).joinpath("data", DATA).read_text(encoding="utf-8")
    return {name: entry for name, entry in json.loads(text).items() if name != "about"}


def words(name: str) -> tuple[str, ...]:
    """Entry ``name``'s words, as written (a list a module uses as words, not as a pattern: ``facts._GENERIC``)."""
    return tuple(entries()[name]["words"])


def _fill(text: str, own: str | None, name: str) -> str:
    def one(m: re.Match[str]) -> str:
        if m[1] == "words":
            if own is None:
                raise KeyError(f"{DATA}: {name} names <words> but has none")
            return own
        return fragment(m[1])

    return _PLACEHOLDER.sub(one, text)


def _group(name: str) -> str | None:
    """Entry ``name``'s words as one group, ``(?:a|b|c)``, the names in them filled (None: it has no words)."""
    entry = entries()[name]
    return _fill("(?:" + "|".join(entry["words"]) + ")", None, name) if "words" in entry else None


@cache
def fragment(name: str) -> str:
    """What ``<name>`` stands for in a pattern: the entry's pattern text, or its words as one group."""
    entry = entries()[name]
    if "pattern" not in entry:
        return _group(name) or ""
    pattern = entry["pattern"]
    return _fill(pattern if isinstance(pattern, str) else "".join(pattern), _group(name), name)


@cache
def pattern(name: str) -> re.Pattern[str]:
    """Entry ``name`` compiled: its pattern, or any of its words as a whole word (``\\b(?:a|b|c)\\b``)."""
    entry = entries()[name]
    text = fragment(name) if "pattern" in entry else rf"\b{_group(name)}\b"
    return re.compile(text, 0 if entry.get("case_sensitive") else re.I)
