"""Conversation.recall: what localpager remembers for a question, without its model (for an app's own model)."""

from __future__ import annotations

import pytest

from localpager.core.pager import PagingConfig


def chat_with_memories(fake_pager):
    lp = fake_pager()
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_2", budget=80))
    chat.add_turn("user", "I went to a support group yesterday.", time="1:56 pm on 8 May, 2023")
    chat.add_turn("assistant", "That sounds good.", stamp=False)
    chat.add_turn("user", "My dog is called Biscuit.", stamp=False)
    chat.add_turn("assistant", "Lovely name.", stamp=False)
    return lp, chat


def test_recall_hands_over_the_turns_a_recall_would_inject_with_their_dates(fake_pager):
    lp, chat = chat_with_memories(fake_pager)
    calls = len(lp.backend.calls)
    result = chat.recall("When did I go to the support group?", max_turns=3)
    assert len(lp.backend.calls) == calls  # the model wrote nothing
    first = result.turns[0]
    assert (first.turn, first.page_id, first.injected, first.dates) == (0, 1, True, ["7 May 2023"])
    assert first.time == "1:56 pm on 8 May, 2023" and first.text.startswith("I went")
    assert len(result.turns) == 3 and not any(t.injected for t in result.turns[1:])
    assert [t.score for t in result.turns[1:]] == sorted((t.score for t in result.turns[1:]), reverse=True)
    data = result.to_dict()
    assert data["question"] == "When did I go to the support group?" and isinstance(data["relevant"], bool)
    assert 0.0 <= data["probability"] <= 1.0


def test_recall_shows_a_corrected_turn_as_its_newest_statement(fake_pager):
    lp, chat = chat_with_memories(fake_pager)
    chat.correct(2, "My dog is called Pepper now.")
    turns = chat.recall("What is my dog called?", max_turns=4).turns
    assert turns[0].text == "My dog is called Pepper now." and turns[0].label == "latest"
    older = [t for t in turns if t.turn == 2]
    assert not older or older[0].label == "changed"


def test_recall_checks_its_arguments_and_an_empty_conversation_recalls_nothing(fake_pager):
    lp, chat = chat_with_memories(fake_pager)
    with pytest.raises(ValueError, match="needs a question"):
        chat.recall("  ")
    with pytest.raises(ValueError, match="max_turns"):
        chat.recall("dog?", max_turns=0)
    empty = lp.conversation("e", create=True).recall("anything?")
    assert empty.turns == [] and empty.relevant is False


def test_a_general_question_injects_nothing_and_a_memory_question_pages_in(fake_pager):
    """With pages evicted, "How do I tie a tie?" is answered from the chat's own prompt (the gate says memory is
    not relevant, and the trace says what it saw), while a question about what the user said pages in (the
    standing facts off: "My dog is called Biscuit." would answer it first; tests/fast/test_facts.py)."""
    from localpager.runtime.settings import RecallSettings

    lp = fake_pager(["Over, under, through.", "Biscuit."], recall=RecallSettings(facts=False))
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_2", budget=30))
    for role, text in [("user", "My dog is called Biscuit."), ("assistant", "Lovely name."),
                       ("user", "I like long walks in the park."), ("assistant", "Nice."),
                       ("user", "The weather was grey today."), ("assistant", "Sorry to hear.")]:
        chat.add_turn(role, text, stamp=False)
    assert chat.pager.evicted
    general = chat.ask("How do I tie a tie?", remember=False).trace
    assert general.injected_page_ids == [] and general.decision == "answer"
    assert general.gate is not None and general.gate["recall"] is False
    assert set(general.gate["features"]) >= {"question", "general_form", "best_type"}
    memory = chat.ask("What is my dog called?", remember=False).trace
    assert memory.gate["recall"] is True and memory.injected_page_ids == [1]
