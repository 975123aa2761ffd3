"""Every GBNF grammar localpager constrains the model with, and the parser of its decision.

The decision: the model's first output is either ``recall(page_ids=[3,5])``, naming only pages that
are evicted right now, or the start of a direct answer. That grammar is built for each turn from
integers, never from user text, so it is always valid; whatever the model emits parses.

The assistant's side work (``assist.py``): keywords as a JSON list of the page's own candidate terms
(written as escaped JSON string literals, so any term is safe), a batch of them per page, the pages
cooperative eviction may let go, and a yes/no verdict. The evaluation's search baseline writes a query.
"""

from __future__ import annotations

import json
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


def choice_grammar(options: Sequence[str]) -> str:
    """Exactly one of ``options`` (written as escaped string literals, so any text is safe)."""
    if not options:
        raise ValueError("a choice grammar needs at least one option")
    return "root ::= " + " | ".join(json.dumps(o, ensure_ascii=False) for o in dict.fromkeys(options)) + "\n"


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


# -- the assistant's grammars (assist.py) and the search baseline's -----------------------------------
WORTH_GRAMMAR = 'root ::= "yes" | "no"\n'
# the evaluation's search baseline: words only, so the model cannot copy "..." from the prompt
SEARCH_GRAMMAR = 'root ::= "search(\\"" [a-zA-Z0-9 ,\x27-]{2,60} "\\")"\n'


def _literal(text: str) -> str:
    """A GBNF string literal matching ``text`` written as a JSON string."""
    as_json = json.dumps(text, ensure_ascii=False)
    return '"' + as_json.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _alternatives(options: Sequence[str]) -> str:
    return " | ".join(_literal(o) for o in options)


def _list_rule(name: str, item: str, most: int, least: int = 1) -> str:
    """``name ::= "[" item (", " item)... "]"`` with ``least``..``most`` items (written out, no ``{m,n}``)."""
    if most < 1:
        return f'{name} ::= "[]"'
    required = min(max(least, 1), most)
    optional = most - required
    body = '"[" ' + item + "".join(' ", " ' + item for _ in range(required - 1))
    body += "".join(' (", " ' + item for _ in range(optional)) + ")?" * optional + ' "]"'
    return f"{name} ::= {body}" + (' | "[]"' if least == 0 else "")


def keywords_grammar(candidates: Sequence[str], k: int) -> str:
    """A JSON list of k of ``candidates`` (all of them if fewer): left a choice of length, SmolLM2-135M
    stopped after one keyword."""
    if not candidates:
        raise ValueError("a keyword grammar needs at least one candidate")
    n = min(k, len(candidates))
    return "\n".join([_list_rule("root", "kw", n, least=n), f"kw ::= {_alternatives(candidates)}"]) + "\n"


def batch_grammar(pages: Sequence[tuple[int, Sequence[str]]], k: int) -> str:
    """A JSON object naming every page id, in order, each with a list of k of its own candidates."""
    if not pages or any(not c for _, c in pages):
        raise ValueError("a batch grammar needs pages, each with at least one candidate")
    members = ' ", " '.join(f'"\\"{pid}\\": " l{pid}' for pid, _ in pages)
    rules = [f'root ::= "{{" {members} "}}"']
    for pid, cands in pages:
        n = min(k, len(cands))
        rules.append(_list_rule(f"l{pid}", f"k{pid}", n, least=n))
        rules.append(f"k{pid} ::= {_alternatives(cands)}")
    return "\n".join(rules) + "\n"


def pages_grammar(page_ids: Sequence[int]) -> str:
    """A JSON list of distinct-or-not page ids drawn from ``page_ids``, possibly empty."""
    if not page_ids:
        raise ValueError("a page grammar needs at least one page")
    ids = " | ".join(f'"{i}"' for i in sorted(set(page_ids)))
    return "\n".join([_list_rule("root", "id", len(set(page_ids)), least=0), f"id ::= {ids}"]) + "\n"
