"""Relative dates resolved against a turn's own time (localpager.core.dates), in LoCoMo's words."""

from __future__ import annotations

import re

import pytest
from helpers import LOCOMO

from localpager.core.answer_types import asks_when_told
from localpager.core.dates import annotate, date_terms, format_time, parse_time, resolve, said_day, turn_dates
from localpager.core.records import Turn
from localpager.retrieval.ranking import LexicalIndex

SAID = "1:56 pm on 8 May, 2023"  # a Monday


@pytest.mark.parametrize(("text", "when", "label"), [
    ("I went to a support group yesterday.", SAID, "7 May 2023"),
    ("We did it last night.", SAID, "7 May 2023"),
    ("It was the day before yesterday.", SAID, "6 May 2023"),
    ("The opening is tomorrow.", "10:04 am on 19 June, 2023", "20 June 2023"),
    ("My school event last week was great.", "7:55 pm on 9 June, 2023", "the week before 9 June 2023"),
    ("Guess what I did this week?", "3:31 pm on 23 August, 2023", "the week of 23 August 2023"),
    ("Last weekend I joined a program.", "2:31 pm on 17 July, 2023", "the weekend before 17 July 2023"),
    ("We went camping two weekends ago.", "2:31 pm on 17 July, 2023", "two weekends before 17 July 2023"),
    ("Last Fri I took the kids.", "1:51 pm on 15 July, 2023", "the Friday before 15 July 2023"),
    ("I joined a group last Tues.", "8:56 pm on 20 July, 2023", "the Tuesday before 20 July 2023"),
    ("I went there two days ago.", "4:33 pm on 12 July, 2023", "10 July 2023"),
    ("I'm going to a conference this month.", "1:36 pm on 3 July, 2023", "July 2023"),
    ("I hope to attend next month.", "7:54 pm on 17 August, 2023", "September 2023"),
    ("We met last month.", "7:34 pm on 18 April, 2023", "March 2023"),
    ("We had a blast last year.", "1:50 pm on 17 August, 2023", "2022"),
    ("A friend made it for my birthday ten years ago.", "10:37 am on 27 June, 2023", "2013"),
    ("We camped last summer.", "12:10 am on 11 August, 2023", "the summer of 2022"),
    ("See you in 3 weeks.", "10:04 am on 19 June, 2023", "three weeks after 19 June 2023"),
    ("The deadline is in 3 days.", "2026-12-01T10:00:00+00:00", "4 December 2026"),
    ("Let's meet this Friday.", "2026-12-01T10:00:00+00:00", "4 December 2026"),  # a Tuesday: that week's Friday
])
def test_relative_expressions_resolve_as_locomo_writes_them(text: str, when: str, label: str) -> None:
    assert [r.label for r in resolve(text, when)] == [label]


SUNDAY = "2026-12-06T10:00:00+00:00"


@pytest.mark.parametrize(("text", "label"), [
    ("The dentist is on Friday.", "11 December 2026"),  # told of what is to come: the coming one
    ("My dentist appointment is this Friday at 3pm.", "11 December 2026"),  # not the Friday of the week said in
    ("I will call him on Wednesday.", "9 December 2026"),
    ("We are flying out on Sunday.", "13 December 2026"),  # said on a Sunday: the next one
    ("I saw the dentist on Friday.", "the Friday before 6 December 2026"),  # told of the past: the past one
    ("My sister got married on Saturday and it was lovely.", "the Saturday before 6 December 2026"),
    ("I saw her this Friday.", "4 December 2026"),
])
def test_a_weekday_with_no_last_or_next_is_read_by_the_tense_of_its_clause(text: str, label: str) -> None:
    assert [r.label for r in resolve(text, SUNDAY)] == [label]


def test_no_time_no_expression_or_no_date_resolves_nothing() -> None:
    assert resolve("I went yesterday.", None) == []
    assert resolve("I went yesterday.", "sometime") == []
    assert resolve("I take two pills twice a day, every day.", SAID) == []  # durations and habits say no date
    assert resolve("the last week of September was busy", SAID) == []  # "the last week" is not "last week"
    assert resolve("we lay on sun loungers", SAID) == []


def test_annotate_puts_the_date_beside_the_expression_and_search_reads_it() -> None:
    text = "I went to a support group yesterday and it was powerful."
    assert annotate(text, SAID) == "I went to a support group yesterday [7 May 2023] and it was powerful."
    assert annotate(text, None) == text
    assert date_terms(text, SAID) == "7 May 2023"
    turns = [Turn("user", text, 0, time=SAID, speaker="Caroline"), Turn("user", "I like May flowers.", 1)]
    index = LexicalIndex()
    scores = index.scores("What happened on 7 May 2023?", [0, 1], turns)
    assert scores[0] > scores[1]  # the resolved date is searchable


def test_a_chat_reply_quoting_the_user_is_not_resolved_inside_the_quote() -> None:
    """A quoted answer stored as the reply repeats words said on another day: read against the reply's own time,
    "tomorrow" would name the wrong day."""
    from localpager.runtime.prompts import turn_line

    reply = 'You told me on 6 December 2026: "My dentist appointment is tomorrow at 3pm." See you tomorrow.'
    later = "2026-12-09T10:00:00+00:00"
    assert annotate(reply, later, quoted=False) == reply.replace("you tomorrow.", "you tomorrow [10 December 2026].")
    assert turn_line(Turn("assistant", reply, 5, time=later)).endswith(
        '"My dentist appointment is tomorrow at 3pm." See you tomorrow [10 December 2026].')
    said = Turn("user", "My dentist appointment is tomorrow at 3pm.", 4, time="2026-12-06T09:00:00+00:00")
    assert "tomorrow [7 December 2026]" in turn_line(said)  # the user's own words are resolved as ever
    # a transcript's second speaker is an "assistant" turn with a name: resolved as any speaker's, quotes too
    assert 'said "see you tomorrow [9 May 2023]"' in turn_line(
        Turn("assistant", 'She said "see you tomorrow" and left.', 6, time=SAID, speaker="Dave"))


def test_times_are_parsed_and_shown_in_one_style() -> None:
    assert parse_time(SAID).isoformat() == "2023-05-08T13:56:00"
    assert parse_time("2026-12-01T14:05:00+00:00").hour == 14
    assert parse_time("not a time") is None and parse_time(None) is None
    assert format_time("2026-12-01T14:05:00+00:00") == "2:05 pm on 1 December, 2026"
    assert format_time(SAID) == SAID  # LoCoMo's own strings are shown as they are


@pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo is read from ../shared/data/locomo")
def test_locomo_temporal_answers_are_the_resolved_dates() -> None:
    """On LoCoMo 1-5, of the temporal questions whose evidence holds a relative expression, the resolved date is
    the answer itself for most; the rest are answers that are no date or typos ("21Janury")."""
    from localpager.lab.metrics import normalize
    from localpager.store.loaders import load_conversations

    def norm(text: str) -> str:
        text = re.sub(r"(?<=\d)(?=[A-Za-z])|(?<=[A-Za-z])(?=\d)", " ", str(text))
        return " ".join(w for w in normalize(text).split() if w != "the")

    asked = found = 0
    for conv in load_conversations(LOCOMO).conversations[:5]:
        for probe in conv.probes:
            if probe.extra.get("category") != 2:
                continue
            labels = [norm(r.label) for i in probe.evidence for r in resolve(conv.turns[i].text, conv.turns[i].time)]
            if labels:
                asked += 1
                answer = norm(probe.answers[0])
                found += any(label == answer or label in answer or answer in label for label in labels)
    assert asked >= 100 and found / asked >= 0.7  # measured: 93 of 123


def test_a_turn_that_says_when_speaks_of_that_day_not_of_the_day_it_was_said() -> None:
    when = "2024-03-05T12:03:00+00:00"
    # a question asking when is answered with one of these (runtime.recall's date choice): "yesterday" leaves
    # no room for the day the turn was said
    assert turn_dates("Yesterday I got my passport renewed.", when) == ["4 March 2024"]
    assert turn_dates("I got my passport renewed at the town hall.", when) == ["5 March 2024"]
    assert turn_dates("I got my passport renewed at the town hall.", when, said=False) == []
    assert turn_dates("Today I sold the piano, and yesterday the desk.", when) == ["5 March 2024", "4 March 2024"]
    assert turn_dates("Yesterday I got my passport renewed.", None) == []


def test_the_day_a_turn_was_said_is_its_own_whatever_its_words_speak_of() -> None:
    # "When did I mention ...?" is answered with it (runtime.recall's date choice)
    assert said_day("2024-03-05T12:03:00+00:00") == ["5 March 2024"]
    assert said_day(None) == []


@pytest.mark.parametrize("question, told", [
    ("When did I mention my plumber?", True),
    ("What day did I tell you about the party?", True),
    ("When did I last say I was tired?", True),
    ("When did I move to Utrecht?", False),  # when it happened
    ("When did I tell my boss?", False),  # telling someone else is an event too
])
def test_a_question_asking_when_its_speaker_said_something(question, told):
    assert asks_when_told(question) is told
