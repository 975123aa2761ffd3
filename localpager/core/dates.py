"""Relative time in a turn, resolved against the turn's own time.

"I went to a support group yesterday", said on 8 May 2023, means 7 May 2023; asked weeks later "when
did she go?", a small model given the turn and its date has to do that arithmetic itself, and cannot.
So the arithmetic is done here, once, from the turn's text and the time stored with it: each relative
expression becomes a ``ResolvedDate`` whose ``label`` is written the way LoCoMo writes its answers
("7 May 2023", "the week before 9 June 2023", "the Friday before 15 July 2023", "June 2023", "2022").
The injected line shows it beside the expression (``annotate``) and the lexical index reads it, so
"what did I do in May 2023?" finds "yesterday" said on 8 May.

Rules, not a general date parser: the expressions people use in chat are a short, closed list, and a
rule gives LoCoMo's wording (a parser gives a timestamp). Measured on LoCoMo conversations 1-5 (tests):
every "yesterday", "last week", "last Friday", "last weekend", "this month", "next month", "last year",
"N years ago" of the temporal questions' evidence resolves to its answer. Linear in the text; a weekday that
says neither "last" nor "next" ("on Friday", "this Friday") is the coming one or a past one by the tense of its
clause, read from its parse (``syntax.tells_past``: "The dentist is on Friday.", "I saw her on Friday."), the
only expressions that need one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache

from .syntax import tells_past

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_WEEKDAY_FORMS = {
    "mon": 0, "monday": 0, "tue": 1, "tues": 1, "tuesday": 1, "wed": 2, "weds": 2, "wednesday": 2,
    "thu": 3, "thur": 3, "thurs": 3, "thursday": 3, "fri": 4, "friday": 4, "sat": 5, "saturday": 5,
    "sun": 6, "sunday": 6,
}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple of": 2, "a couple of": 2}
_SEASONS = ("spring", "summer", "fall", "autumn", "winter")

_DAY_NAMES = "|".join(sorted(_WEEKDAY_FORMS, key=len, reverse=True))
_COUNT = r"(?P<n>\d{1,2}|a couple of|couple of|a few|few|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"(?P<unit>day|week|weekend|month|year)s?"
# one alternation, longest forms first, each a named group: the first that matches at a position wins
_EXPRESSION = re.compile(
    rf"\b(?:(?P<before_yesterday>the day before yesterday)"
    rf"|(?P<count>(?:(?P<in>in)\s+)?{_COUNT}\s+{_UNIT}(?:\s+(?P<ago>ago))?)"
    rf"|(?P<yesterday>yesterday|last night)"
    rf"|(?P<today>today|tonight|this (?:morning|afternoon|evening))"
    rf"|(?P<tomorrow>tomorrow)"
    rf"|(?<!\bthe\s)(?P<rel>(?P<which>last|this past|past|this|next|coming)\s+"
    rf"(?P<what>week(?:end)?|month|year|{'|'.join(_SEASONS)}|(?P<day>{_DAY_NAMES})\.?))"
    rf"|(?P<on_day>on\s+(?P<day2>{'|'.join(WEEKDAYS)}))"
    rf")\b",
    re.I,
)
_LOCOMO_TIME = re.compile(
    r"(?:(?P<h>\d{1,2}):(?P<m>\d{2})\s*(?P<ap>[ap]m)\s+on\s+)?(?P<d>\d{1,2})\s+(?P<mon>[A-Za-z]+),?\s+(?P<y>\d{4})", re.I)


@dataclass(frozen=True)
class ResolvedDate:
    """One relative expression of a turn (``text`` as written, at ``start:end``) and what it means."""

    text: str
    start: int
    end: int
    label: str  # as LoCoMo writes it: "7 May 2023", "the week before 9 June 2023", "2022"


def parse_time(value: str | None) -> datetime | None:
    """A turn's stored time: ISO 8601 (what localpager stamps) or LoCoMo's "1:56 pm on 8 May, 2023"."""
    if not value:
        return None
    text = value.strip()
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        pass
    match = _LOCOMO_TIME.search(text[:80])
    if not match:
        return None
    month = _month(match["mon"])
    if month is None:
        return None
    hour = minute = 0
    if match["h"]:
        hour, minute = int(match["h"]) % 12 + (12 if match["ap"].lower() == "pm" else 0), int(match["m"])
    try:
        return datetime(int(match["y"]), month, int(match["d"]), hour, minute)
    except ValueError:
        return None


def now_stamp() -> str:
    """The present moment as a turn's time: ISO 8601 in local time with its offset, to the second."""
    return datetime.now().astimezone().isoformat(timespec="seconds")


def format_time(value: str | None) -> str | None:
    """A stored time as the prompt shows it: LoCoMo's own strings unchanged, ISO as "2:05 pm on 1 December, 2026"."""
    if not value:
        return value
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return value
    hour = moment.hour % 12 or 12
    return f"{hour}:{moment.minute:02d} {'am' if moment.hour < 12 else 'pm'} on {moment.day} {MONTHS[moment.month - 1]}, {moment.year}"


def format_day(value: str | None) -> str | None:
    """A stored time as a reader understands it, without the clock: "1 December 2026" (for ISO and LoCoMo's
    "1:56 pm on 8 May, 2023" alike). A recalled line carries this: a clock time beside a number ("10:39 PM")
    is a number a small model answers with ("the locker with the 10:39 PM date is mine")."""
    moment = parse_time(value)
    if moment is None:
        return value
    return day_label(moment.date())


def day_label(day: date) -> str:
    return f"{day.day} {MONTHS[day.month - 1]} {day.year}"


def month_label(year: int, month: int) -> str:
    year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
    return f"{MONTHS[month - 1]} {year}"


def resolve(text: str, when: str | None) -> list[ResolvedDate]:
    """The relative expressions of ``text`` resolved against ``when`` (a turn's stored time); none
    without a time."""
    if not text or not when:
        return []
    return list(_resolve(text, when))


@lru_cache(maxsize=8192)
def _resolve(text: str, when: str) -> tuple[ResolvedDate, ...]:
    anchor = parse_time(when)
    if anchor is None:
        return ()
    day = anchor.date()
    out = []
    for match in _EXPRESSION.finditer(text):
        label = _label(match, day)
        if label:
            out.append(ResolvedDate(match.group(), match.start(), match.end(), label))
    return tuple(out)


def _label(m: re.Match, day: date) -> str | None:
    anchor = day_label(day)
    if m["before_yesterday"]:
        return day_label(day - timedelta(days=2))
    if m["yesterday"]:
        return day_label(day - timedelta(days=1))
    if m["today"]:
        return anchor
    if m["tomorrow"]:
        return day_label(day + timedelta(days=1))
    if m["count"]:  # "two weeks ago", "in three days"; "twice a day" says no time
        return _count_label(m, day, ago=bool(m["ago"])) if bool(m["ago"]) != bool(m["in"]) else None
    if m["on_day"]:  # "on Friday": the coming one when its clause is not in the past tense, else the past one
        weekday = _WEEKDAY_FORMS[m["day2"].lower()]
        if tells_past(m.string, m.start()) is False:  # "The dentist is on Friday."
            return day_label(day + timedelta(days=(weekday - day.weekday() - 1) % 7 + 1))
        return f"the {WEEKDAYS[weekday]} before {anchor}"  # chat tells of what happened far more than of plans
    which, what = m["which"].lower(), m["what"].lower().rstrip(".")
    past, future = which in ("last", "this past", "past"), which in ("next", "coming")
    if m["day"]:
        weekday = _WEEKDAY_FORMS[m["day"].lower().rstrip(".")]
        if not (past or future):  # "this Friday": that day of the anchor's week, or the coming one when its clause
            ahead = tells_past(m.string, m.start()) is False  # is not in the past tense ("My appointment is ...")
            return day_label(day + timedelta(days=(weekday - day.weekday()) % 7 if ahead
                                             else weekday - day.weekday()))
        return f"the {WEEKDAYS[weekday]} {'before' if past else 'after'} {anchor}"
    if what in ("week", "weekend"):
        return f"the {what} {'before' if past else 'after' if future else 'of'} {anchor}"
    if what == "month":
        return month_label(day.year, day.month + (-1 if past else 1 if future else 0))
    if what == "year":
        return str(day.year + (-1 if past else 1 if future else 0))
    season = "autumn" if what == "fall" else what  # a season: last summer said in August 2023 is summer 2022
    return f"the {season} of {day.year + (-1 if past else 1 if future else 0)}"


def _count_label(m: re.Match, day: date, ago: bool) -> str | None:
    unit = m["unit"].lower()
    n = _count(m["n"])
    if n is None:  # "a few days ago"
        return f"a few {unit}s {'before' if ago else 'after'} {day_label(day)}"
    sign = -1 if ago else 1
    if unit == "day":
        return day_label(day + timedelta(days=sign * n))
    if unit == "year":
        return str(day.year + sign * n)
    if unit == "month":
        return month_label(day.year, day.month + sign * n)
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}.get(n, str(n))
    plural = unit + ("s" if n > 1 else "")
    return f"{words} {plural} {'before' if ago else 'after'} {day_label(day)}"


def _count(word: str) -> int | None:
    word = " ".join(word.lower().split())
    if word.isdigit():
        return int(word)
    return _NUMBERS.get(word)


def _month(word: str) -> int | None:
    word = word.lower()
    for i, name in enumerate(MONTHS):
        if len(word) >= 3 and name.lower().startswith(word):
            return i + 1
    return None


def relative(text: str, when: str | None) -> bool:
    """Whether ``text``, said at ``when``, speaks of a day relative to it ("tomorrow", "last year")."""
    return bool(resolve(text, when))


def annotate(text: str, when: str | None, quoted: bool = True) -> str:
    """``text`` with each resolved expression followed by its date in brackets:
    "I went there yesterday [7 May 2023]". Without ``quoted``, not an expression inside quotation marks: a reply
    quoting the user ('You told me on 6 December 2026: "... tomorrow ..."') repeats words said on another day."""
    resolved = [r for r in resolve(text, when) if quoted or not _inside_quotes(text, r.start)]
    if not resolved:
        return text
    parts, last = [], 0
    for r in resolved:
        parts += [text[last:r.end], f" [{r.label}]"]
        last = r.end
    parts.append(text[last:])
    return "".join(parts)


def _inside_quotes(text: str, at: int) -> bool:
    """Whether position ``at`` of ``text`` lies between an opening and a closing quotation mark."""
    before = text[:at]
    return before.count('"') % 2 == 1 or before.count("\u201c") > before.count("\u201d")


def date_terms(text: str, when: str | None) -> str:
    """The resolved dates of ``text`` as one string, for the lexical index ("7 May 2023 June 2023")."""
    return " ".join(r.label for r in resolve(text, when))


def turn_dates(text: str, when: str | None, said: bool = True) -> list[str]:
    """The dates a turn speaks of: its relative expressions resolved, or, when it has none (``said``), the day it
    was said: what it tells happened that day unless it says otherwise ("Yesterday I sold the piano", said on
    5 March 2024, speaks of 4 March only). Empty for a turn without a time."""
    if parse_time(when) is None:
        return []
    resolved = [r.label for r in resolve(text, when)]
    return list(dict.fromkeys(resolved)) if resolved else said_day(when) if said else []


def said_day(when: str | None) -> list[str]:
    """The day a turn was said, as ``turn_dates`` labels it (none for a turn without a time): what answers "When
    did I mention ...?", whatever day its words speak of."""
    anchor = parse_time(when)
    return [day_label(anchor.date())] if anchor is not None else []

