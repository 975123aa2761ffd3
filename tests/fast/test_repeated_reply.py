"""Issue 32 (8): in a chat the model gave "I'm sorry for any confusion, but as a dental professional…" word for
word to four questions in a row. An answer that comes out word for word one of the conversation's last replies
(to another question) is held back, generated again with a penalty on repeated tokens, and the trace says so;
the client sees only the new one. On the fakes (tests/fakes.py)."""

from __future__ import annotations

import pytest
from fakes import ScriptedBackend, shortest_sentence

from localpager.core.records import Turn
from localpager.runtime.guard import RepetitionGuard

STUCK = "I'm sorry for any confusion, but as a dental professional I can only talk about teeth."
FRESH = "Your flight to Lisbon leaves on Friday morning."


def turns(*pairs) -> list[Turn]:
    return [Turn(index=i, role=role, text=text) for i, (role, text) in enumerate(pairs)]


def test_earlier_replies_are_the_last_few_to_other_questions():
    from localpager.runtime.guard import earlier_replies

    history = turns(("user", "Hi"), ("assistant", "Hello there!"), ("user", "Where do I fly?"),
                    ("assistant", "  To LISBON. "), ("user", "Thanks"), ("assistant", ""))
    assert earlier_replies(history, "Anything else?") == ("to lisbon.", "hello there!")
    assert earlier_replies(history, "where do I  fly?") == ("hello there!",)  # the same question: no loop
    assert earlier_replies(history, "x", last=1) == ("to lisbon.",)


def test_the_guard_holds_an_answer_back_while_it_may_be_an_earlier_reply():
    shown: list[str] = []
    guard = RepetitionGuard(shown.append, earlier=(STUCK.lower(),))
    for word in STUCK.split(" "):
        guard(word + " ")
    guard.text = guard.text.strip()
    assert shown == [] and guard.repeats_earlier
    shown.clear()
    guard = RepetitionGuard(shown.append, earlier=(STUCK.lower(),))
    for word in "I'm sorry for the delay, here it is.".split(" "):
        guard(word + " ")
    guard.flush()
    assert "".join(shown).startswith("I'm sorry for the delay") and not guard.repeats_earlier


@pytest.fixture
def stuck(fake_pager):
    """A model that says ``STUCK`` to everything unless repeats are penalised."""
    backend = ScriptedBackend()

    def reply(prompt: str, grammar: str | None) -> str:
        if grammar:
            return shortest_sentence(grammar)
        return FRESH if backend.calls[-1].options.get("repeat_penalty", 1.0) > 1.0 else STUCK

    backend.fallback = reply
    return fake_pager(backend=backend), backend


def test_a_reply_the_conversation_just_had_is_generated_again_and_the_trace_says_so(stuck):
    lp, backend = stuck
    conv = lp.conversation("c", create=True)
    first = conv.ask("Can you check my teeth?")
    assert first.answer == STUCK and first.trace.repeated == ""
    shown: list[str] = []
    second = conv.ask("When do flights to Lisbon usually leave?", on_text=shown.append)
    assert second.answer == FRESH and second.trace.repeated == "regenerated"
    assert "".join(shown).strip() == FRESH  # the repeat never reached the client
    penalties = [c.options.get("repeat_penalty", 1.0) for c in backend.calls if c.grammar is None]
    assert penalties[-2] == 1.0 and penalties[-1] > 1.0
    assert conv.turns[-1].text == FRESH


def test_the_same_question_may_get_the_same_answer(stuck):
    lp, backend = stuck
    conv = lp.conversation("c", create=True)
    assert conv.ask("Can you check my teeth?").answer == STUCK
    again = conv.ask("Can you check my teeth?")
    assert again.answer == STUCK and again.trace.repeated == ""
    assert all(c.options.get("repeat_penalty", 1.0) == 1.0 for c in backend.calls)


def test_a_repeat_that_survives_the_penalty_is_sent_and_named_in_the_trace(fake_pager):
    lp = fake_pager(backend=ScriptedBackend(fallback=lambda p, g: shortest_sentence(g) if g else STUCK))
    conv = lp.conversation("c", create=True)
    conv.ask("Can you check my teeth?")
    shown: list[str] = []
    answer = conv.ask("When do flights usually leave?", on_text=shown.append)
    assert answer.answer == STUCK and answer.trace.repeated == "sent again"
    assert "".join(shown).strip() == STUCK and answer.trace.to_dict()["repeated"] == "sent again"
