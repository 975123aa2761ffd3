"""Checks on text from outside (files, the command line, an app) before any of it is stored.

SQLite stores text as UTF-8: a lone surrogate (what Python makes of undecodable bytes on the command line,
or a JSON ``"\\ud800"``) fails deep inside a write with "'utf-8' codec can't encode", naming neither the
file nor the field. A conversation id is shown in listings, one a line, tab-separated: a tab, a newline or
an escape sequence in one breaks every listing (or the terminal). Checking here gives one-line errors
before anything is written.
"""

from __future__ import annotations

MAX_ID_LENGTH = 200


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored as a turn, or None. Any valid Unicode is kept as it is (control
    tokens, RTL marks, GBNF metacharacters): only what UTF-8 cannot hold, and NUL, are refused."""
    if not isinstance(text, str):
        return f"must be text, got {type(text).__name__}"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"is not valid Unicode (lone surrogate {text[exc.start]!r} at character {exc.start})"
    if "\x00" in text:
        return f"holds a NUL character (at character {text.index(chr(0))})"
    return None


def id_problem(conv_id: str) -> str | None:
    """Why ``conv_id`` cannot name a conversation, or None: printable, no control characters, no
    surrounding spaces, at most ``MAX_ID_LENGTH`` characters."""
    if not isinstance(conv_id, str) or not conv_id:
        return "must be a non-empty string"
    if problem := text_problem(conv_id):
        return problem
    bad = next((c for c in conv_id if not c.isprintable()), None)
    if bad is not None:
        return f"holds the control or invisible character {bad!r}; use printable characters only"
    if conv_id != conv_id.strip():
        return "starts or ends with a space"
    if len(conv_id) > MAX_ID_LENGTH:
        return f"is {len(conv_id)} characters long (at most {MAX_ID_LENGTH})"
    return None


def check_text(text: str, what: str = "turn text") -> str:
    """``text``, or a ``ValueError`` saying what is wrong with it."""
    if problem := text_problem(text):
        raise ValueError(f"{what} {problem}")
    return text


def check_id(conv_id: str) -> str:
    """``conv_id``, or a ``ValueError`` saying what is wrong with it."""
    if problem := id_problem(conv_id):
        raise ValueError(f"conversation id {conv_id!r} {problem}")
    return conv_id


def did_you_mean(wanted: str, known) -> str:
    """``"; did you mean 'trip'?"`` (or ``"; did you mean one of 'a', 'b'?"``) for the ids of ``known`` close to
    ``wanted``, as click suggests a mistyped command; ``""`` when none is close."""
    from difflib import get_close_matches

    known = [k for k in known if k != wanted]
    same_case = [k for k in known if k.casefold() == wanted.casefold()]
    close = same_case or get_close_matches(wanted, known, n=3, cutoff=0.6)
    if not close:
        return ""
    if len(close) == 1:
        return f"; did you mean {close[0]!r}?"
    return f"; did you mean one of {', '.join(map(repr, close))}?"
