"""Every prompt the runtime writes, and every message it assembles: the chat's prompt, the answer prompts of a
recall or a standing fact, and the fixed texts an answer may be ("not remembered", the overview).

The chat's prompt is laid out so that llama.cpp re-evaluates as little as possible:

    system line | standing facts | bookmarks of evicted pages | resident turns | the new user turn

A 135M model cannot read past a long system message with a bookmark list and hundreds of tokens of resident
turns: handed exactly the evidence turn inside the chat's full prompt it answered 0.25 of generated probes, in a
short prompt of its own (the turn, ``Question: …``, ``Answer in a few words.``) 0.63. So a recall is answered,
by default, in a *focused* prompt on a second llama.cpp context, and the chat's own prompt and KV cache stay
untouched. The other layouts stay selectable for larger models and for measurement (``eval --layout``).
"""

from __future__ import annotations

from typing import Sequence

from ..backends.base import Message
from ..core.answer_types import asked_types, asks_when_past
from ..core.dates import annotate, format_day, format_time, relative
from ..core.facts import StandingFact
from ..core.pager import Pager
from ..core.records import Turn
from .choices import Layout
from .selector import Injection
from .settings import check_layout

# -- the chat's prompt ------------------------------------------------------------------------------------------
SYSTEM_PROMPT = "You are a helpful assistant. Answer briefly and only from what was said in this conversation."
# The standing facts the prompt's stable prefix shows (``core.facts``), after the system line: they change only
# when a durable fact is stated, so llama.cpp keeps them in its cache with the rest of the prefix.
FACTS_PROMPT = "What the user has told you about themselves:\n{facts}"
MEMORY_PROMPT = (
    "Older parts of this conversation were moved to numbered pages. Bookmarks (page: keywords):\n"
    "{bookmarks}\n"
    "To read pages before answering, reply only with recall(page_ids=[N])."
)

# -- the answer prompts -----------------------------------------------------------------------------------------
# Measured on the 72 generated probes of seed 0, evidence turn given (greedy, repetition guard): this
# system line 0.58; the chat's longer one ("... Answer briefly and only from what was said in this
# conversation.") 0.50; without the "From earlier" line 0.56; "Earlier I said: ..." 0.47.
ANSWER_SYSTEM = "You are a helpful assistant."
FOCUSED_PROMPT = "From earlier in this conversation:\n{notes}\n\nQuestion: {question}\nAnswer in a few words."
NOTES_SYSTEM = ANSWER_SYSTEM + "\nNotes from earlier in this conversation:\n{notes}"
INLINE_PROMPT = "Earlier in this conversation:\n{notes}\n\n{question}"

# A recalled turn's label: the newest statement of a thing, or an older one that a later turn changed.
LATEST = "latest"
CHANGED = "changed later"

# -- answers written without the model --------------------------------------------------------------------------
# The answer when what a recall found does not answer the question (``retrieval.answerable``), and when it was read
# but the model's answer states a value it does not hold (``runtime.grounding``): there something was mentioned,
# and saying it was not would be untrue. LoCoMo's scorer and the eval read both as an abstention
# (``lab.metrics.says_not_mentioned``).
NOT_REMEMBERED = "I don't remember that: it was not mentioned in our conversation, or it was forgotten."
NOT_IN_WHAT_I_FOUND = "I don't remember that: what I found in our conversation does not say it."
OVERVIEW_ABOUT_YOU = "Here is what I remember about you:"
OVERVIEW_TRANSCRIPT = "Here is what I remember:"  # a transcript's facts are its speakers', not the user's
OVERVIEW_EMPTY = "I don't remember anything about you yet: nothing you told me is kept as a standing fact."


def turn_message(turn: Turn) -> Message:
    content = f"{turn.speaker}: {turn.text}" if turn.speaker else turn.text
    return Message(turn.role if turn.role in ("user", "assistant") else "user", content)


def system_message(pager: Pager, show_bookmarks: bool = True, facts: Sequence[StandingFact] = ()) -> Message:
    """The system line, the standing facts, then the bookmarks: what changes least comes first."""
    content = system_text(facts)
    listed = pager.listed
    if listed and show_bookmarks:
        content += "\n" + MEMORY_PROMPT.format(bookmarks="\n".join(pager.bookmark(p) for p in listed))
    return Message("system", content)


def system_text(facts: Sequence[StandingFact] = ()) -> str:
    """The system message before the bookmarks: the system line and the standing facts shown."""
    if not facts:
        return SYSTEM_PROMPT
    return SYSTEM_PROMPT + "\n" + FACTS_PROMPT.format(facts="\n".join(f"- {fact_line(f)}" for f in facts))


def chat_messages(pager: Pager, question: str | None, show_bookmarks: bool = True,
                  facts: Sequence[StandingFact] = ()) -> list[Message]:
    """The chat's prompt: the system message, then the resident turns; ``question`` is appended when it is not
    a turn of the pager."""
    messages = [system_message(pager, show_bookmarks, facts)]
    for page in pager.resident:
        messages += [turn_message(pager.turns[i]) for i in page.turn_range if pager.turns[i].text]  # not forgotten
    if question is not None:
        messages.append(Message("user", question))
    return messages


def fact_line(fact: StandingFact) -> str:
    """A standing fact as the prompt shows it: the speaker's words, with the speaker's name in a transcript."""
    return f"{fact.speaker}: {fact.text}" if fact.speaker else fact.text


def fact_turn(fact: StandingFact) -> Turn:
    """A standing fact as a note's line: its words, said by its speaker at its source turn's time."""
    return Turn(role="user", text=fact.text, index=fact.turn, time=fact.time, speaker=fact.speaker)


# How an answer quoting the user's own words opens: only a fact answer may (``guard.RepetitionGuard.claims``)
QUOTE_OPENING = "You told me"
# ... and one quoting what they asked for: a request tells nothing, yet names what it was for ("Write me a cover
# letter for the data analyst job at Acme Foods." answers "Which job did I apply for?")
ASKED_OPENING = "You asked me"


def fact_lead(fact: StandingFact, *also: StandingFact, dated: bool = True) -> str:
    """How a fact answer begins: the fact quoted, as said ("You told me: ..."; a transcript's "Caroline said: ..."),
    and any other facts of the same speaker that answer too (``also``: 'You told me: "..." and "..."'); with
    ``dated``, the user's with the day each was said when its words count from it ("My dentist appointment is
    tomorrow at 3pm.": 'You told me on 6 December 2026: "..."'), asked about days later."""
    if fact.speaker:  # a transcript's: quoted as said, without a day (LoCoMo scores its answers word by word)
        return quoted(f"{fact.speaker} said", [(f.text, None) for f in (fact, *also)])
    return quoted(QUOTE_OPENING, [(f.text, f.time if dated and relative(f.text, f.time) else None)
                                  for f in (fact, *also)])


def recall_quote(said: Sequence[tuple[str, str | None]], asked: bool = False) -> str:
    """An answer about the user's own life from a recall, as the words they said that it took its words from,
    quoted as said (``quoted``). A small model's answer restates the question around a value of the notes, and
    when the notes hold another thing's value ("Who is my electrician?" with "My plumber is Nadia Petrova.") its
    answer says it of the thing asked ("Your electrician is Nadia Petrova."); the words quoted show what memory
    holds. ``asked``: the words are requests, which told nothing ('You asked me: "Suggest a dinner for tonight."'),
    not 'You told me'."""
    return quoted(ASKED_OPENING if asked else QUOTE_OPENING, said)


def quoted(who: str, said: Sequence[tuple[str, str | None]]) -> str:
    """``who`` and what they said, quoted: 'You told me: "..." and "..."'. ``said``: each text and the time to show
    it was said at (None: none), 'You told me on 3 December 2026: "..."'. The words are the turn's, unchanged, so
    that erasing them (``fact_edits.holding``, a forget's ``controls.quotes``) finds the answer too; the day
    tells what "tomorrow" meant."""
    parts = []
    for text, when in said:
        day = f" on {format_day(when)}" if when else ""
        parts.append(f'{day}: "{text}"' if not parts else f' and{day}: "{text}"' if day else f' and "{text}"')
    return who + "".join(parts)


def overview_text(chosen: Sequence[StandingFact]) -> str:
    """The answer to "what do you remember about me?": the ``chosen`` standing facts (current ones only), each
    quoted as said ("You told me: ...", a transcript's "Caroline said: ...") with its day. Nothing else: the topics
    of old pages would bring back values a newer fact replaced."""
    if not chosen:
        return OVERVIEW_EMPTY
    header = OVERVIEW_ABOUT_YOU if any(not f.speaker for f in chosen) else OVERVIEW_TRANSCRIPT
    return "\n".join([header] + [f"- {fact_lead(f, dated=False)}" + (f" ({format_day(f.time)})" if f.time else "")
                                 for f in chosen])


def turn_line(turn: Turn, label: str = "", clock: bool = False, stamped: bool = True) -> str:
    """One recalled turn as the model reads it: ``[1 December 2026] speaker: text (label)``, each relative date
    in the text followed by the date it means ("yesterday [7 May 2023]", ``dates.annotate``; in a chat assistant's
    reply, not inside quotation marks: a quoted answer repeats the user's words). The clock time
    only with ``clock`` (``wants_clock``): beside a number, a small model answers with the time. Without
    ``stamped``, no day it was said (the relative dates are still resolved)."""
    when = f"[{(format_time if clock else format_day)(turn.time)}] " if turn.time and stamped else ""
    mark = f" ({label})" if label else ""
    # a chat assistant's reply quotes the user's words said on another day: those are not resolved against it
    words = annotate(turn.text, turn.time, quoted=turn.by_person)
    return f"{when}{turn.speaker or turn.role}: {words}{mark}"


def recalled_notes(turns: Sequence[Turn], injections: Sequence[Injection], clock: bool = False) -> str:
    """The recalled turns, one a line, in the order the selector chose (best or newest first)."""
    return "\n".join(turn_line(turns[i], inj.labels.get(i, ""), clock) for inj in injections for i in inj.turns)


def wants_clock(question: str) -> bool:
    """Whether the recalled lines show the clock time they were said at: only for a question asking at what
    time something happened ("What time did I call the plumber?")."""
    return "time" in asked_types(question) and asks_when_past(question)


def answer_messages(layout: str, notes: str, question: str, recent: Sequence[Message] = ()) -> list[Message]:
    """The messages of a recall answer under ``layout`` (all but ``inline``, which extends the chat's prompt)."""
    layout = check_layout(layout)
    if layout == Layout.FOCUSED:
        return [Message("system", ANSWER_SYSTEM), Message("user", FOCUSED_PROMPT.format(notes=notes, question=question))]
    if layout == Layout.FOCUSED_RECENT:
        return [Message("system", ANSWER_SYSTEM), *recent,
                Message("user", FOCUSED_PROMPT.format(notes=notes, question=question))]
    if layout == Layout.NOTES_SYSTEM:
        return [Message("system", NOTES_SYSTEM.format(notes=notes)), Message("user", question)]
    raise ValueError(f"the {layout} layout extends the chat's own prompt; it has no answer prompt of its own")


def inline_message(notes: str, question: str) -> Message:
    """The ``inline`` layout's recall: the recalled turns and the question again, after the chat's prompt."""
    return Message("user", INLINE_PROMPT.format(notes=notes, question=question))


def recent_exchange(messages: Sequence[Message], layout: str) -> list[Message]:
    """The chat's last exchange before the question, for the ``focused+recent`` layout."""
    if layout != Layout.FOCUSED_RECENT:
        return []
    return [m for m in messages[1:-1] if m.role in ("user", "assistant")][-2:]
