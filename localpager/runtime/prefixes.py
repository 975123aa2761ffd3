"""What the context that answers recalls keeps read: the prefixes of focused answer prompts.

Every recall's answer prompt begins with the same system line and header, and the likeliest recalls begin with
the same note. A backend that ``keeps_prefixes`` saves the KV cache of such a prefix (``generate(keep=...)``)
and puts it back for a later prompt beginning with it, so a recall reads only what is new to it: its notes and
its question. Each kept length is a common prefix of two renderings of the same layout, so a token merged
across a boundary is never kept.
"""

from __future__ import annotations

from typing import Sequence

from ..backends.base import ChatBackend, Message
from .prompts import LATEST, answer_messages
from .choices import Layout


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens ``a`` and ``b`` share from their start."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def kept_parts(backend: ChatBackend, layout: str, notes: str, recent: Sequence[Message],
               prompt: Sequence[int]) -> tuple[int, ...]:
    """The prefixes of a focused answer ``prompt`` worth keeping on the side context (``keep`` of
    ``generate``): the part every recall shares (system line and header) and that part with these notes
    (the same turns recalled for another question). Each is the prompt's common prefix with the same layout
    rendered without notes or without the question. Empty for a backend that keeps no prefixes."""
    if not backend.keeps_prefixes:
        return ()
    fixed = common_prefix(prompt, backend.render(answer_messages(layout, "", "", recent)))
    with_notes = common_prefix(prompt, backend.render(answer_messages(layout, notes, "", recent)))
    return tuple(n for n in dict.fromkeys((fixed, with_notes)) if 0 < n < len(prompt))


def prime(backend: ChatBackend, layout: Layout) -> bool:
    """Read the part every recall's answer prompt shares into ``backend``, kept there. False when there is
    nothing to do (kept already: after a forget's clear it is not)."""
    prompt = backend.render(answer_messages(layout, "-", "?", []))
    fixed = common_prefix(prompt, backend.render(answer_messages(layout, "", "", [])))
    if not 0 < fixed < len(prompt) or backend.has_kept(prompt[:fixed]):
        return False
    backend.generate(prompt[:fixed + 1], max_tokens=1, keep=(fixed,))
    return True


def read_ahead(backend: ChatBackend, layout: Layout, line: str) -> tuple[int, ...] | None:
    """Read a note ``line`` into ``backend`` as a recall's first note stands, kept there; the kept part ends where
    the line does, so it serves a note with a label or more turns after it too. The tokens kept, or None when
    there is nothing to keep or no room to keep it without pushing out another kept prefix (``kept_fits``)."""
    prompt = backend.render(answer_messages(layout, line, "?", []))
    # the tokens this note's prompts share, whether the question, a label or another turn follows the line
    n = min(common_prefix(prompt, backend.render(answer_messages(layout, line + " (" + LATEST + ")", "?", []))),
            common_prefix(prompt, backend.render(answer_messages(layout, line + "\n" + line, "?", []))))
    if not 0 < n < len(prompt):
        return None
    if not backend.has_kept(prompt[:n]):
        if not backend.kept_fits(n):
            return None
        backend.generate(prompt[:n + 1], max_tokens=1, keep=(n,))
    return tuple(prompt[:n])
