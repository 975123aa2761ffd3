"""The repetition guard and the eval's definition of a repeated sentence (pure logic, no model)."""

from __future__ import annotations

from localpager.guard import RepetitionGuard, repeated_sentence

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
    from localpager.layouts import CHANGED, LATEST, Injection, answer_messages, recalled_notes
    from localpager.records import Page, Turn

    turns = [Turn("user", "My budget is $20,000.", 0), Turn("assistant", "Noted.", 1),
             Turn("user", "I went to a support group yesterday.", 2, time="1:56 pm on 8 May, 2023", speaker="Caroline"),
             Turn("user", "Actually the budget is $23,500 now.", 3)]
    page = Page(1, 0, 3)
    notes = recalled_notes(turns, [Injection(page, [3, 0], {3: LATEST, 0: CHANGED}), Injection(page, [2])])
    assert notes.splitlines() == [
        "user: Actually the budget is $23,500 now. (latest)",
        "user: My budget is $20,000. (changed later)",
        "[1:56 pm on 8 May, 2023] Caroline: I went to a support group yesterday.",
    ]
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
