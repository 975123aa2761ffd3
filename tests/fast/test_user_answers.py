"""Issue 40 (2): a user's conversations share their standing facts at answer time. A new conversation's prompt
prefix carries the user's facts and its answers quote them, cited with the conversation they were said in; the
newest value wins across conversations; another user's conversation, or nobody's, gets none of it. On the fakes
(tests/fakes.py: the scripted model, the hashing embedder); tests/model/test_user_memory.py has the real ones."""

from __future__ import annotations

import pytest
from fakes import ScriptedBackend, shortest_sentence

from localpager.runtime.prompts import NOT_REMEMBERED
from localpager.runtime.trace import citation_lines

pytestmark = pytest.mark.both_stores

REPLY = "Sounds good."
UTRECHT = "I live in Utrecht with my partner."
LYON = "We live in Lyon now, since the move."


@pytest.fixture
def lp(fake_pager):
    backend = ScriptedBackend()
    backend.fallback = lambda prompt, grammar: shortest_sentence(grammar) if grammar else REPLY
    return fake_pager(backend=backend)


def told(lp, conv_id: str, user: str | None, *texts: str):
    chat = lp.conversation(conv_id, create=True, user=user)
    for text in texts:
        chat.add_turn("user", text)
        chat.add_turn("assistant", "Noted.")
    return chat


def test_a_new_conversation_of_the_user_knows_their_facts_and_cites_where_they_were_said(lp):
    told(lp, "mon", "alice", "Can you recommend a film?", UTRECHT)
    tue = lp.conversation("tue", create=True, user="alice")
    answer = tue.ask("Where do I live?")
    t = answer.trace
    assert t.decision == "fact" and answer.answer == f'You told me: "{UTRECHT}"'
    (cited,) = t.citations
    assert (cited.conversation, cited.page_id, cited.turn) == ("mon", None, 2)
    assert citation_lines([c.__dict__ for c in t.citations])[0].startswith("from memory: mon turn 2")
    assert t.facts[0]["conversation"] == "mon"
    # the prompt's stable prefix carries the user's facts: a general question's prompt shows it
    tue.ask("Any tips for ironing shirts?")
    assert UTRECHT in lp.backend.calls[-1].text


def test_the_newest_value_wins_across_conversations(lp):
    told(lp, "mon", "alice", UTRECHT)
    told(lp, "tue", "alice", LYON)
    wed = lp.conversation("wed", create=True, user="alice")
    t = wed.ask("Where do we live?").trace
    assert t.decision == "fact" and LYON in t.answer and "Utrecht" not in t.answer
    assert t.facts[0]["replaced"] and "Utrecht" in t.facts[0]["replaced"][0]["text"]
    assert [f.text for f in lp.user("alice").facts()] == [LYON]


def test_another_users_or_nobodys_conversation_gets_nothing_of_it(lp):
    told(lp, "mon", "alice", UTRECHT)
    for conv_id, user in (("bob-1", "bob"), ("nobody", None)):
        chat = lp.conversation(conv_id, create=True, user=user)
        answer = chat.ask("Where do I live?")
        assert answer.answer == NOT_REMEMBERED and not answer.trace.facts and not answer.trace.citations
        assert all("Utrecht" not in call.text for call in lp.backend.calls)
        assert chat.facts() == []


def test_a_fact_of_another_conversation_is_not_counted_as_this_ones_asked_fact(lp):
    told(lp, "mon", "alice", UTRECHT)
    tue = told(lp, "tue", "alice", "My gym locker is number 41.")
    tue.ask("Where do I live?")  # fact 1 of mon, while tue has a fact 1 of its own
    assert [f.asked for f in tue.facts()] == [0]
    assert [f.asked for f in lp.conversation("mon").facts()] == [0]


RAMEN = "We tried a ramen place called Menya Kodo near the station."


def test_a_question_about_the_past_in_a_new_chat_is_answered_from_the_users_earlier_chat(lp):
    told(lp, "mon", "alice", "Can you recommend a film?", RAMEN, "Pancakes or waffles?")
    # the model answers from what it was given (an answer taking nothing from it would be "not remembered")
    lp.backend.fallback = lambda prompt, grammar: (shortest_sentence(grammar) if grammar else
                                                   "Menya Kodo." if RAMEN in prompt else REPLY)
    tue = lp.conversation("tue", create=True, user="alice")
    t = tue.ask("What was the ramen place near the station called?").trace
    assert t.decision == "recall" and t.trigger in ("gate", "personal")
    assert ("mon", 2, RAMEN) in [(c.conversation, c.turn, c.text) for c in t.citations]
    assert all(c.page_id is None for c in t.citations)
    assert RAMEN in lp.backend.calls[-1].text  # the answer was given the turn of Monday's chat
    # nobody else's conversation is searched
    bob = lp.conversation("bob-1", create=True, user="bob")
    before = len(lp.backend.calls)
    t = bob.ask("What was the ramen place near the station called?").trace
    assert t.decision != "recall" and not t.citations
    assert all(RAMEN not in call.text for call in lp.backend.calls[before:])


def test_a_turn_forgotten_in_the_earlier_chat_is_not_recalled_from_the_new_one(lp):
    told(lp, "mon", "alice", "Can you recommend a film?", RAMEN)
    tue = lp.conversation("tue", create=True, user="alice")
    lp.user("alice").forget(match="Menya Kodo")
    t = tue.ask("What was the ramen place near the station called?").trace
    assert all("Menya" not in c.text for c in t.citations) and "Menya" not in t.answer
    assert all("Menya" not in call.text for call in lp.backend.calls)


def test_a_forget_at_the_users_scope_leaves_the_value_in_no_answer_and_no_byte_of_the_store(lp):
    """Issue 40's bar: after ``lp.user(U).forget(match=V)``, V is in no answer and in no byte of the store, though a
    later chat of the user answered with it (its answer, trace and citation held V in another conversation)."""
    if lp.store.kind != "sqlite":
        pytest.skip("the bytes of a database server's files are not this process's to read")
    from faultkit import leaks

    told(lp, "mon", "alice", "Can you recommend a film?", "My locker code is Zorvanth.")
    tue = lp.conversation("tue", create=True, user="alice")
    assert "Zorvanth" in tue.ask("What is my locker code?").answer  # stored in tue: answer, trace, citation
    report = lp.user("alice").forget(match="Zorvanth")
    assert {r.conversation for r in report.reports} == {"mon", "tue"}
    wed = lp.conversation("wed", create=True, user="alice")
    assert "Zorvanth" not in wed.ask("What is my locker code?").answer
    lp.close()
    assert leaks(lp.store.path, "Zorvanth") == []
