"""GBNF grammars for the model's decision, built for each turn from the pages that can be recalled.

The model's first output is either ``recall(page_ids=[3,5])``, naming only pages that are evicted
right now, or the start of a direct answer. The grammar is generated from integers, never from user
text, so it is always valid; whatever the model emits parses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

RECALL_PREFIX = "recall(page_ids=["
_RECALL = re.compile(r"^recall\(page_ids=\[(\d+(?:,\d+)*)\]\)$")
_ANY_CHAR = "[^\\x00]"


@dataclass(frozen=True)
class Decision:
    """What the model chose: recall these pages, or answer (``answer_start`` begins the answer)."""

    page_ids: tuple[int, ...] = ()
    answer_start: str = ""

    @property
    def is_recall(self) -> bool:
        return bool(self.page_ids)


def _id_rule(page_ids: Sequence[int]) -> str:
    return " | ".join(f'"{i}"' for i in sorted(set(page_ids)))


def _not_recall_rule() -> str:
    """Any text that does not start with ``recall(``: diverge from it at some character."""
    word = "recall("
    options = []
    for n in range(len(word)):
        prefix = f'"{word[:n]}" ' if n else ""
        options.append(f"{prefix}[^{word[n]}] rest")
    options += [f'"{word[:n]}"' for n in range(1, len(word))]
    return " | ".join(options)


def recall_grammar(page_ids: Sequence[int], max_pages: int = 2, allow_answer: bool = True) -> str:
    """Either a recall naming 1..``max_pages`` of ``page_ids`` or, if ``allow_answer``, any other text."""
    if not page_ids:
        raise ValueError("a recall grammar needs at least one evicted page")
    if max_pages < 1:
        raise ValueError("max_pages must be at least 1")
    more = "".join(' ("," id' for _ in range(max_pages - 1)) + ")?" * (max_pages - 1)
    rules = [
        "root ::= recall" + (" | answer" if allow_answer else ""),
        f'recall ::= "{RECALL_PREFIX}" id{more} "])"',
        f"id ::= {_id_rule(page_ids)}",
    ]
    if allow_answer:
        rules += [f"answer ::= {_not_recall_rule()}", f"rest ::= {_ANY_CHAR}*"]
    return "\n".join(rules) + "\n"


def is_recall_prefix(text: str) -> bool:
    """Whether ``text`` can still become a recall call (the decision is not made yet)."""
    return RECALL_PREFIX.startswith(text) or text.startswith(RECALL_PREFIX)


def parse_decision(text: str) -> Decision:
    """The decision in a model output; a complete recall call, else the start of an answer."""
    match = _RECALL.match(text.strip())
    if match:
        ids = tuple(dict.fromkeys(int(i) for i in match.group(1).split(",")))
        return Decision(page_ids=ids)
    return Decision(answer_start=text)
