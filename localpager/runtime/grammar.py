"""What localpager holds the model's output to, and the parser of its decision.

The constraints are typed objects (``backends.constraints``) that each backend renders for its engine: GBNF for
llama.cpp, GBNF or a JSON schema for a model server. This module builds the runtime's:

- the decision (``RecallChoice``): the model's first output is either ``recall(page_ids=[3,5])``, naming only
  pages that are evicted right now, or the start of a direct answer; ``parse_decision`` reads it. A server
  that answers in JSON is read back into the same text by the backend, so this parser reads every backend;
- a "when" question's answer (``OneOf`` the recalled dates, built in ``recall.py``);
- the assistant's side work (``assist.py``): keywords as a JSON list of the page's own candidate terms
  (``keyword_list``), a batch of them per page (``keyword_batch``), the pages cooperative eviction may let go
  (``page_list``), and a yes/no verdict (``WORTH``); the evaluation's search baseline writes a query
  (``SEARCH_QUERY``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from ..backends.constraints import RECALL_PREFIX, JsonList, JsonObject, OneOf, Phrase, RecallChoice

_RECALL = re.compile(r"^recall\(page_ids=\[(\d+(?:,\d+)*)\]\)$")


@dataclass(frozen=True)
class Decision:
    """What the model chose: recall these pages, or answer (``answer_start`` begins the answer)."""

    page_ids: tuple[int, ...] = ()
    answer_start: str = ""

    @property
    def is_recall(self) -> bool:
        return bool(self.page_ids)


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


# -- the assistant's constraints (assist.py) and the search baseline's -----------------------------------
WORTH = OneOf(("yes", "no"))
# the evaluation's search baseline: words only, so the model cannot copy "..." from the prompt
SEARCH_QUERY = Phrase("a-zA-Z0-9 ,'-", 2, 60, prefix='search("', suffix='")', key="query")


def keyword_list(candidates: Sequence[str], k: int) -> JsonList:
    """A JSON list of k of ``candidates`` (all of them if fewer): left a choice of length, SmolLM2-135M
    stopped after one keyword."""
    if not candidates:
        raise ValueError("a keyword list needs at least one candidate")
    n = min(k, len(candidates))
    return JsonList(tuple(candidates), n, n, key="keywords")


def keyword_batch(pages: Sequence[tuple[int, Sequence[str]]], k: int) -> JsonObject:
    """A JSON object naming every page id, in order, each with a list of k of its own candidates."""
    if not pages or any(not c for _, c in pages):
        raise ValueError("a keyword batch needs pages, each with at least one candidate")
    return JsonObject(tuple((str(pid), keyword_list(cands, k)) for pid, cands in pages))


def page_list(page_ids: Sequence[int]) -> JsonList:
    """A JSON list of page ids drawn from ``page_ids``, possibly empty."""
    if not page_ids:
        raise ValueError("a page list needs at least one page")
    return JsonList(tuple(page_ids), 0, len(set(page_ids)), key="pages")


__all__ = ["RECALL_PREFIX", "SEARCH_QUERY", "WORTH", "Decision", "RecallChoice", "is_recall_prefix", "keyword_batch",
           "keyword_list", "page_list", "parse_decision"]
