"""Names the store reads before anything is opened: whether a store value is a database URL, and what a
namespace may be called. Standard library only, imported by every store module (no import circle)."""

from __future__ import annotations

import re

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):/")  # scheme:/ (Path turns scheme:// into scheme:/)
NAMESPACE = re.compile(r"[a-z0-9][a-z0-9_]{0,39}")


def is_url(text: str) -> bool:
    """``scheme://...``, or ``postgresql:/...`` as ``Path`` leaves it; a Windows drive (``C:/``) is a path."""
    match = _URL.match(text)
    return bool(match) and len(match.group(1)) > 1


def check_namespace(name: str) -> str:
    """A namespace's name: lower-case letters, digits and ``_``, up to 40 (it names a schema or a file);
    anything else is a ``ValueError`` saying so."""
    if not isinstance(name, str) or not NAMESPACE.fullmatch(name):
        raise ValueError(f"namespace {name!r}: use lower-case letters, digits and _ (up to 40, starting with a "
                         "letter or digit)")
    return name
