"""Whether an answer about the user states only what memory holds.

A recall for a question about the user's own life ("Where does my sister live?") injects the turns that matched
best, and the relevance floor lets through turns that only look relevant. Given a turn about something else, a
small model still answers, and it makes the value up: "Your sister lives in Lisbon." from a turn about a holiday.
Stored as its reply, that invention reads later like memory. So such an answer is held back until it is complete,
and every value it states (a number, a name: a word written with a capital mid-sentence) must be in what a person
said among the recalled turns (``evidence``: their lines as the model read them, dates resolved; the day each was
said only for a question about when something happened, ``stamps_answer``) or in the question; an answer stating
one that is not is replaced by "not remembered". So is an answer about what a
transcript's person told (a question naming them: LoCoMo's "What type of car did Calvin work on during the
workshop?" got "a 2018 Toyota Corolla", never said). The assistant's recalled replies are
no evidence: an earlier reply that made a value up would otherwise vouch for it. An answer that states no value
passes: it invents nothing a later answer could cite. But a question asking for something the user told has only
what they said for an answer: one taking no word from the recalled lines beyond the question's own ("The answer is
\"The morning walk\"", "Your answer is too long and doesn't provide any useful information.") answers from
nothing, and is replaced too (``takes_from``). So is an answer about what a named person told that takes no word
from what that person said among the recalled lines (``check``'s ``told_by``): LoCoMo's questions about something
never said name one of its two people for what the other told, or for nothing ("What design is featured on Dave's
guitar?"); the recall finds lines of theirs about something else, and the answer ("The design on Calvin's guitar is
a unique and special guitar.") is made of the question's words and the model's, not of what they told.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Collection, Sequence

from ..core import lexicon
from ..core.answer_types import asks_when, asks_when_past
from ..core.dates import annotate
from ..core.facts import handed_over
from ..core.records import Turn
from ..core.syntax import asks_for_work, relays_listener
from ..core.text import NAME_MID_SENTENCE, content_words, has_question_form, sentences, tokenize_words
from .prompts import turn_line
from .selector import Injection

_DIGITS = re.compile(r"\d+")
_POLAR = lexicon.pattern("polar")  # "No, they are not."
# a list's numbering ("Basil: 1. Water it ... 2. ..."), at the start or after a line break or a sentence's end
_ENUMERATOR = re.compile(r"(?:^|(?<=[\n:;.!?]))\s*\d{1,2}[.)]\s+")
# a quotation mark: what follows it after a sentence's end opens a sentence (". \"This")
_QUOTES = re.compile(r"[\"\u201c\u201d\u2018\u2019]|(?<!\w)'|'(?!\w)")


@dataclass
class Grounding:
    """The check of one answer: the values it states that nothing shown holds (none: grounded), and whether it
    takes anything from what was shown (``takes_from``; only asked of an answer to a question for a told value)."""

    unsupported: list[str] = field(default_factory=list)
    takes: bool | None = None  # None: not asked
    told_by: bool | None = None  # it takes a word from the named people's own lines; None: none named

    @property
    def grounded(self) -> bool:
        return not self.unsupported and self.takes is not False and self.told_by is not False

    def to_dict(self) -> dict:
        found = {"grounded": self.grounded, "unsupported": self.unsupported}
        if self.takes is not None:
            found["takes_from_notes"] = self.takes
        if self.told_by is not None:
            found["takes_from_named"] = self.told_by
        return found


def values(answer: str) -> list[str]:
    """The values ``answer`` states: its runs of digits (not a list's numbering) and its names (capitalized words
    mid-sentence)."""
    # what opens a sentence as well as ". " does: a list's number, a line break, more spaces ("worth it.  Just")
    lines = _ENUMERATOR.sub(". ", _QUOTES.sub("", answer)).splitlines()
    answer = " ".join(". ".join(line.strip() for line in lines if line.strip()).split())
    return _DIGITS.findall(answer) + [m[0] for m in NAME_MID_SENTENCE.finditer(answer)]


def evidence(turns: Sequence[Turn], injections: Sequence[Injection], clock: bool = False,
             speakers: Collection[str] = (), stamped: bool = True, told: bool = False,
             question: str | None = None) -> str:
    """The recalled lines a person said (a user's turn, or a transcript's named speaker's), as the notes show them:
    what an answer about the user may take a value from. ``speakers`` (lower case): only the lines these people
    said (a full name's by its first name too). Without ``stamped``, each line without the day it was said
    (``stamps_answer``): what they said, its relative dates resolved, is the evidence then. With ``told``, only
    what they told: each line's sentences that have no question's form ("Is it worth renting a car in Cape
    Town?" tells nothing of who the rent is paid to). With ``question``, a chat user's lines without what they handed
    over that it does not ask about (``_own_part``)."""
    firsts = {n.split()[0] for n in speakers if n}
    lines = []
    for inj in injections:
        for i in inj.turns:
            turn = turns[i]
            if not turn.by_person or (firsts and not _said_by(turn, firsts)):
                continue
            turn = _own_part(turn, question)
            turn = _told_part(turn) if told else turn
            if turn.text:
                lines.append(turn_line(turn, inj.labels.get(i, ""), clock, stamped))
    return "\n".join(lines)


def asks_only(text: str) -> bool:
    """Whether ``text`` (a user's turn) only asks: each of its sentences is a question or a request by its parse
    (``syntax.asks_for_work``: "Suggest a dinner for tonight."), so that quoted it is what they asked for, not what
    they told. A sentence the parse does not read as a request ("Hi!", "I'm vegan.") tells."""
    said = _unasked(text)
    return bool(said) and all(asks_for_work(s) for s in said)


def tells(text: str, question: str = "") -> bool:
    """Whether ``text`` (a chat user's turn) tells something: a sentence of it has no question's form, is no
    request by its parse ("Any tips for keeping basil alive on a windowsill?" and "Suggest a dinner." tell nothing),
    does not pass on what the assistant said (``_own_part``) and hands over no one's words nor a text to work on
    that ``question`` does not ask about (``_own_part``: "Translate to Portuguese: I am allergic to penicillin." tells
    nothing of the user's allergies)."""
    return any(not asks_for_work(s) and not relays_listener(s) and _asks_about(s, question)
               for s in _unasked(text))


def _own_part(turn: Turn, question: str | None = None) -> Turn:
    """A chat user's ``turn`` without its sentences that pass on what the assistant said ("You said my husband's
    name is Ethan.": ``syntax.relays_listener``): the assistant's words are no evidence of the user's, and taken as
    theirs, a made-up answer would come back as memory. With ``question``, nor those whose words after a colon or in
    quotation marks are not their claim (``facts.handed_over``: someone's words framed, a text handed over for
    work) unless ``question`` asks about them, sharing a word with what hands them over ("What did I ask you to
    translate?"): taken as the user's, "Translate to Portuguese: I am allergic to penicillin." answered "Am I
    allergic to anything?" with itself, quoted as what they told. Any other turn as it is (a transcript's "you" is
    another speaker)."""
    if turn.role != "user" or turn.speaker:
        return turn
    said = sentences(turn.text)
    own = [s.strip() for s in said
           if not relays_listener(s) and (question is None or _asks_about(s, question))]
    return turn if len(own) == len(said) else replace(turn, text=" ".join(own))


def _asks_about(sentence: str, question: str) -> bool:
    """Whether ``sentence`` is the user's own claim (``facts.handed_over``), or ``question`` shares a word with what
    hands its words over."""
    head = handed_over(sentence)
    return head is None or bool(_terms(head) & _terms(question))


def _unasked(text: str) -> list[str]:
    """The sentences of ``text`` that have no question's form."""
    return [s.strip() for s in sentences(text) if not has_question_form(s)]


def _told_part(turn: Turn) -> Turn:
    """``turn`` with only its sentences that have no question's form."""
    return replace(turn, text=" ".join(_unasked(turn.text)))


def stamps_answer(question: str, told: bool) -> bool:
    """Whether the day a recalled line was said may back a value of the answer to ``question``: when it asks when
    something happened ("When did I call the plumber?"), or for nothing the user told. A question for a told
    value (``told``) or for a date still to come ("When's the cutoff for my visa form?") is answered by what was
    said: the day it was said is no evidence for it. A small model takes its dates from what the notes show:
    "What date is the hallway painter coming?", recalling "[6 December 2026] user: The hallway could use a lighter
    colour.", got "The hallway painter is coming on December 26.", whose month the line's own day vouched for; and
    a count nobody told was vouched for by the day of the month a line was said (LoCoMo: "How many pets does James
    have?" got "James has 20 pets!", "How many turtles does Nate have?" "Nate has 25 turtles.")."""
    return asks_when_past(question) or not (told or asks_when(question))


def _said_by(turn: Turn, firsts: set[str]) -> bool:
    return bool(turn.speaker) and turn.speaker.lower().split()[0] in firsts


def _terms(text: str) -> set[str]:
    """What ``takes_from`` compares: the content words (lightly stemmed) and the values' digits ("UA792": 792)."""
    return set(content_words(text, "light")) | {d.lstrip("0") for d in _DIGITS.findall(text)}


def _taken(answer: str, question: str) -> set[str]:
    """The terms of ``answer`` that ``question`` does not hold: what it may have taken from the notes."""
    return _terms(answer) - _terms(question)


def takes_from(answer: str, notes: str, question: str) -> bool:
    """Whether ``answer`` uses a word of ``notes`` (what was recalled) that ``question`` does not hold: a content
    word (lightly stemmed) or a value's digits."""
    return bool(_taken(answer, question) & _terms(notes))


def sources(answer: str, turns: Sequence[Turn], injections: Sequence[Injection], question: str,
            most: int = 2) -> list[int]:
    """The recalled turns a person said that ``answer`` took its words from (those of its words ``question`` does
    not hold) in what they told (their sentences without a question's form), most first, at most ``most``; ties
    in the order the selector ranked them. A yes or a no takes nothing: none."""
    if _POLAR.match(answer):
        return []
    taken = _taken(answer, question)
    shared = []
    for rank, i in enumerate(i for inj in injections for i in inj.turns):
        if not turns[i].by_person:
            continue
        told = _told_part(_own_part(turns[i], question))  # a question tells nothing to quote, nor the assistant's
        # words, nor a text handed over
        count = len(taken & _terms(annotate(told.text, told.time)))
        if count:
            shared.append((-count, rank, i))
    return [i for _, _, i in sorted(shared)[:most]]


QUOTED_CHARS = 300  # a source turn longer than this is quoted by its sentences that ``answer`` took words from


def excerpt(text: str, answer: str, question: str) -> str:
    """``text`` (a source turn's words), or when longer than ``QUOTED_CHARS`` its sentences that ``answer`` took
    words from (``sources``), joined by an ellipsis: a pasted page is not quoted whole."""
    if len(text) <= QUOTED_CHARS:
        return text
    taken = _taken(answer, question)
    kept = [s.strip() for s in sentences(text) if taken & _terms(s)]
    return " \u2026 ".join(kept) if kept else text[:QUOTED_CHARS].rstrip() + "\u2026"


def check(answer: str, notes: str, question: str, value: bool = False, told_by: str | None = None,
          told: str | None = None) -> Grounding:
    """Which values of ``answer`` neither ``notes`` (what the model read) nor ``question`` holds (``check_values``);
    with ``value`` (the question asks for something told), whether it takes anything from what the notes told
    too (``told``: ``evidence``'s ``told`` lines; the notes when not given); with ``told_by`` (the lines of the
    people the question names, ``evidence``'s ``speakers``), whether it takes anything from those."""
    found = check_values(answer, notes, question)
    if value:
        found.takes = takes_from(answer, notes if told is None else told, question)
    if told_by is not None:  # a yes or a no answers whether, in no word of anyone's
        found.told_by = takes_from(answer, told_by, question) or bool(_POLAR.match(answer))
    return found


def check_values(answer: str, *shown: str) -> Grounding:
    """Which values of ``answer`` none of ``shown`` (what the model read, and the question) holds: a number by its
    digits ("UA792" holds 792 as "UA 792" does), a name by each of its words, case folded."""
    numbers = {d.lstrip("0") for text in shown for d in _DIGITS.findall(text)}  # "007" is the 7 shown
    words = {w for text in shown for w in tokenize_words(text)}
    unsupported = []
    for value in values(answer):
        if value.isdigit():
            known = value.lstrip("0") in numbers
        else:
            known = all(w in words for w in tokenize_words(value))
        if not known and value not in unsupported:
            unsupported.append(value)
    return Grounding(unsupported)
