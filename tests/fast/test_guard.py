"""The repetition guard and the eval's definition of a repeated sentence (pure logic, no model), and its
streaming: property tests against the guard as it was when it released text at sentence breaks only."""

from __future__ import annotations

import re

from helpers import examples
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from localpager.runtime.guard import MIN_SENTENCE_CHARS, RepetitionGuard, loop_start, repeated_sentence

LOOP = ("That's a great question. In your conversation, I was referring to a situation where you were away. "
        "In your conversation, I was referring to a situation where you were away. In your conv")


def test_repeated_sentence_follows_the_issue_definition():
    assert repeated_sentence(LOOP) == "in your conversation, i was referring to a situation where you were away"
    assert repeated_sentence("Yes. Yes. Yes.") is None  # pieces of 15 characters or fewer do not count
    assert repeated_sentence("Call Dana Whitfield!\nCALL DANA WHITFIELD?") == "call dana whitfield"
    assert repeated_sentence("Your neighbour has the key. She lives at number 12.") is None


def test_guard_stops_at_the_repeat_and_streams_only_what_it_keeps():
    shown: list[str] = []
    guard = RepetitionGuard(lambda piece: shown.append(piece))
    stopped_at = None
    for i in range(0, len(LOOP), 7):  # the model streams a few characters at a time
        if guard(LOOP[i : i + 7]):
            stopped_at = i
            break
    guard.flush()
    assert guard.tripped and stopped_at is not None and stopped_at < len(LOOP) - 7
    assert guard.text == ("That's a great question. In your conversation, I was referring to a situation where "
                          "you were away.")
    assert "".join(shown).strip() == guard.text
    assert repeated_sentence(guard.text) is None


def test_guard_passes_a_good_answer_through_whole():
    shown: list[str] = []
    guard = RepetitionGuard(lambda piece: shown.append(piece))
    answer = "Your neighbour Dana has the spare key. Call her at 555-0142"
    assert not any(guard(answer[i : i + 5]) for i in range(0, len(answer), 5))
    guard.flush()
    assert not guard.tripped and guard.text == answer and "".join(shown) == answer


def test_guard_forwards_a_callers_stop():
    guard = RepetitionGuard(lambda piece: True)
    assert guard("First sentence here. ") is True


def test_recalled_turns_carry_their_time_and_label():
    from localpager.core.records import Page, Turn
    from localpager.runtime.prompts import CHANGED, LATEST, answer_messages, recalled_notes
    from localpager.runtime.selector import Injection

    turns = [Turn("user", "My budget is $20,000.", 0), Turn("assistant", "Noted.", 1),
             Turn("user", "I went to a support group yesterday.", 2, time="1:56 pm on 8 May, 2023", speaker="Caroline"),
             Turn("user", "Actually the budget is $23,500 now.", 3)]
    page = Page(1, 0, 3)
    notes = recalled_notes(turns, [Injection(page, [3, 0], {3: LATEST, 0: CHANGED}), Injection(page, [2])])
    assert notes.splitlines() == [
        "user: Actually the budget is $23,500 now. (latest)",
        "user: My budget is $20,000. (changed later)",
        "[8 May 2023] Caroline: I went to a support group yesterday [7 May 2023].",  # the date it means, beside it
    ]
    clock = recalled_notes(turns, [Injection(page, [2])], clock=True)  # a question asking at what time
    assert clock == "[1:56 pm on 8 May, 2023] Caroline: I went to a support group yesterday [7 May 2023]."
    system, user = answer_messages("focused", notes, "What is my budget?")
    assert system.role == "system" and user.content.endswith("Question: What is my budget?\nAnswer in a few words.")
    assert notes in user.content


def test_guard_stops_a_phrase_loop_inside_one_sentence():
    for loop, kept in [("Mali, Morocco, Morocco, Morocco, Morocco, Morocco", "Mali, Morocco"),
                       ("\"I'm so glad you're here, I'm so glad you're here, I'm so glad you're here, I'm so",
                        "\"I'm so glad you're here")]:
        shown: list[str] = []
        guard = RepetitionGuard(lambda piece: shown.append(piece))
        assert any(guard(loop[i : i + 4]) for i in range(0, len(loop), 4))
        assert guard.tripped and guard.text == kept and "".join(shown) == kept
    guard = RepetitionGuard()
    assert not any(guard(w + " ") for w in "It is very, very good: call Dana at 12 12".split(" "))


# -- streaming by the word --------------------------------------------------------------------------------
class SentenceGuard:
    """The guard as it was before it streamed by the word (text released at sentence breaks only): the
    reference for its stop decisions and its ``text``."""

    def __init__(self):
        self.raw, self.text, self.tripped, self._seen, self._done = "", "", False, set(), 0

    def __call__(self, piece: str) -> bool:
        self.raw += piece
        while (match := re.compile(r"[.!?\n]").search(self.raw, self._done)) is not None:
            sentence = self.raw[self._done : match.start()].strip().lower()
            if len(sentence) > MIN_SENTENCE_CHARS:
                if sentence in self._seen:
                    self.tripped, self.text = True, self.raw[: self._done].rstrip()
                    return True
                self._seen.add(sentence)
            self._done = match.end()
        cut = loop_start(self.raw)
        if cut is not None:
            self.tripped, self.text = True, self.raw[:cut].rstrip(" ,;:-")
            return True
        self.text = self.raw
        return False


def run(chunks: list[str]) -> tuple[RepetitionGuard, list[str], list[bool]]:
    """Feed ``chunks`` until the guard stops, checking after every call that what it streamed begins its text."""
    shown: list[str] = []
    guard = RepetitionGuard(lambda piece: shown.append(piece))
    stops = []
    for chunk in chunks:
        stops.append(guard(chunk))
        assert guard.text.startswith("".join(shown))
        if stops[-1]:
            break
    guard.flush()
    return guard, shown, stops


# Text that loops: sentences and phrases that come round again, in any case, with the characters whose
# lowering is odd (final sigma, the dotted capital I) and what a cut strips.
PHRASES = ["In your conversation, I was referring to a trip", "Morocco", "morocco", "I'm so glad you're here",
           "the cat", "The", "go", "ab", "a", "ΟΔΟΣ", "ΟΔΟΣΑ", "Σ", "οδος", "İstanbul", "Yes sir", "12"]
SEPARATORS = [" ", ", ", ". ", "! ", "? ", "\n", "\n\n", " - ", ": ", ";", "", "  ", ".", "'"]
token = st.one_of(st.sampled_from(PHRASES), st.sampled_from(SEPARATORS), st.text(max_size=3))
texts = st.lists(token, max_size=50).map("".join) | st.lists(
    st.tuples(st.sampled_from(PHRASES), st.sampled_from(SEPARATORS)), max_size=25).map(
    lambda pairs: "".join(p + s for p, s in pairs))


@st.composite
def streams(draw) -> list[str]:
    """A text cut into the pieces a model streams (a few characters each, sometimes many)."""
    text = draw(texts)
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=len(text))))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)]) if a < b]


@settings(max_examples=examples(fast=200, full=1000), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(streams())
@example(["ΟΔΟΣΑ ΟΔΟΣ", "Α ΟΔΟΣΑ "])  # "ΟΔΟΣ" lowers to "οδος", but to "οδοσ…" once a letter follows
@example(["İİ go, go", ", go"])  # "İ" lowers to two characters: the cut's offset is in the lowered text
def test_streamed_text_is_always_the_beginning_of_the_answer(chunks):
    guard, shown, _ = run(chunks)
    # after flush the stream is the answer, every character once, whether the guard stopped or not
    assert "".join(shown) == guard.text
    assert all(shown)


@settings(max_examples=examples(fast=200, full=1000), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(streams())
@example(["ΟΔΟΣΑ ΟΔΟΣ", "Α ΟΔΟΣΑ "])  # "ΟΔΟΣ" lowers to "οδος", but to "οδοσ…" once a letter follows
@example(["İİ go, go", ", go"])  # "İ" lowers to two characters: the cut's offset is in the lowered text
def test_streaming_by_the_word_keeps_the_stop_decisions(chunks):
    guard, _, stops = run(chunks)
    reference = SentenceGuard()
    expected = []
    for chunk in chunks:
        expected.append(reference(chunk))
        if expected[-1]:
            break
    assert stops == expected
    assert (guard.tripped, guard.text) == (reference.tripped, reference.text)


def test_a_good_answer_streams_word_by_word():
    shown: list[str] = []
    guard = RepetitionGuard(lambda piece: shown.append(piece))
    answer = "Your neighbour Dana has the spare key. Call her at 555-0142, she is home after six."
    words = re.findall(r"\S+\s*", answer)
    for i, word in enumerate(words):
        assert not guard(word)
        # everything but the trailing space of the newest word is out already
        assert "".join(shown) == "".join(words[: i + 1]).rstrip(" ,")
    assert shown[:3] == ["Your", " neighbour", " Dana"]  # long before the first sentence ends
    guard.flush()
    assert "".join(shown) == answer


def test_the_guard_holds_only_what_could_still_repeat():
    shown: list[str] = []
    guard = RepetitionGuard(lambda piece: shown.append(piece))
    guard("Your neighbour has the key. She is home today. Your neighbour")  # could be the first sentence again
    assert "".join(shown) == "Your neighbour has the key. She is home today."
    guard(" moved")  # it is not
    assert "".join(shown) == "Your neighbour has the key. She is home today. Your neighbour moved"
    shown.clear()
    guard = RepetitionGuard(lambda piece: shown.append(piece))
    assert not guard("Mali, Morocco, Morocco")  # the second copy of a run that could come round a third time
    assert "".join(shown) == "Mali, Morocco"
    assert not guard(" and Spain")
    assert "".join(shown) == "Mali, Morocco, Morocco and Spain"
    shown.clear()
    guard = RepetitionGuard(lambda piece: shown.append(piece))
    assert not guard("Yes sir. Yes sir.")  # short sentences never repeat, but a run of words can loop
    assert guard(" Yes sir") and guard.text == "Yes sir."
    guard.flush()
    assert "".join(shown) == "Yes sir."  # the sentence guard had already streamed "Yes sir. Yes sir."


VERDICT = "I don't remember that"


def _fed(text: str, step: int = 3) -> tuple[RepetitionGuard, str]:
    shown: list[str] = []
    guard = RepetitionGuard(shown.append, verdicts=(VERDICT,))
    for i in range(0, len(text), step):
        if guard(text[i : i + step]):
            break
    guard.flush()
    return guard, "".join(shown)


def test_an_answer_that_goes_on_into_memorys_verdict_ends_where_it_begins_and_never_streams_it():
    answer = ("Fill the kettle with half water, half vinegar, and boil it. I don\u2019t remember that: it was not "
              "mentioned in our conversation, or it was forgotten.")
    guard, shown = _fed(answer)
    assert guard.dropped_verdict and guard.tripped
    assert guard.text == shown == "Fill the kettle with half water, half vinegar, and boil it."
    for step in (1, 2, 5, 11):  # however the model streams it, no word of the verdict reaches the client
        assert "don" not in _fed(answer, step)[1]


def test_words_that_only_begin_like_the_verdict_are_released_and_an_answer_opening_with_it_is_left_alone():
    guard, shown = _fed("Boil it twice. I don't think vinegar harms the kettle.")
    assert not guard.dropped_verdict and shown == guard.text == "Boil it twice. I don't think vinegar harms the kettle."
    guard, shown = _fed("I don't remember that: it was not mentioned in our conversation.")
    assert not guard.dropped_verdict and shown == "I don't remember that: it was not mentioned in our conversation."
    guard, shown = _fed("Hi don't remember that either.")  # not at a word's start
    assert not guard.dropped_verdict
    guard, shown = _fed("Boil it twice. I")  # the end of the answer releases what was held
    assert shown == "Boil it twice. I"


def test_an_answer_stopped_in_a_loop_while_it_opens_as_a_fact_answer_is_not_passed_on():
    """A new user's check: 'You told me: "no' reached the client, flushed at a loop's stop before the runtime
    could drop the opening (``claims_memory``)."""
    shown: list[str] = []
    guard = RepetitionGuard(shown.append, (), ("You told me",), ())
    text = 'You told me: "no ' + "no " * 30
    assert any(guard(text[i : i + 3]) for i in range(0, len(text), 3))
    assert guard.tripped and guard.claims_memory and shown == []
    plain = RepetitionGuard(shown.append, (), ("You told me",), ())
    text = "Maybe " + "no " * 30
    assert any(plain(text[i : i + 3]) for i in range(0, len(text), 3))
    assert shown and "".join(shown) == plain.text  # any other answer is passed on at the stop as before
