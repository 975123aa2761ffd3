"""Bookmarks: the short line that stands in the prompt for an evicted page.

A bookmark is an index, not a summary: a few specific keywords tell the model (and the ranking)
what the page holds for a fraction of its tokens.
"""

from __future__ import annotations

import re
from typing import Callable

from .choices import DEFAULT_BOOKMARK_FORMAT, BookmarkFormat, choose
from .records import Page
_UNSAFE = re.compile(r"[\[\],:;=\n\r\"]+")
_QUOTE_WORDS = 8


def clean_keyword(keyword: str) -> str:
    """A keyword that cannot break the bookmark syntax."""
    return _UNSAFE.sub(" ", keyword).strip()


def _keywords(page: Page) -> str:
    return ",".join(k for k in map(clean_keyword, page.keywords) if k)


def render_id(page: Page) -> str:
    return f"[p{page.page_id}]"


def render_minimal(page: Page) -> str:
    keywords = _keywords(page)
    return f"[p{page.page_id}:{keywords}]" if keywords else render_id(page)


def best_quote(page: Page) -> str:
    """The first words of the page line that mentions most of its keywords."""
    lines = [line.split(": ", 1)[-1] for line in page.text.splitlines() if line.strip()]
    if not lines:
        return ""
    wanted = [k.lower() for k in page.keywords]
    best = max(lines, key=lambda line: sum(k in line.lower() for k in wanted))
    words = clean_keyword(best).split()
    quote = " ".join(words[:_QUOTE_WORDS])
    return quote + ("…" if len(words) > _QUOTE_WORDS else "")


def render_medium(page: Page) -> str:
    quote = best_quote(page)
    base = render_minimal(page)[:-1]
    return f'{base} "{quote}"]' if quote else base + "]"


def render_structured(page: Page) -> str:
    """``[p3:t=12-31;e=kw1,kw2]``: the turns it covers, then its entities."""
    return f"[p{page.page_id}:t={page.first_turn}-{page.last_turn};e={_keywords(page)}]"


FORMATS: dict[BookmarkFormat, Callable[[Page], str]] = {
    BookmarkFormat.ID: render_id,
    BookmarkFormat.MINIMAL: render_minimal,
    BookmarkFormat.MEDIUM: render_medium,
    BookmarkFormat.STRUCTURED: render_structured,
}


def render_bookmark(page: Page, fmt: str = DEFAULT_BOOKMARK_FORMAT) -> str:
    return FORMATS[choose(BookmarkFormat, fmt, "bookmark format")](page)
