"""Issue 38 (5): a question about the user's own life is answered from memory or "I don't remember that", never
invented by the model; a model answering from its own prompt does not open as a quote of the user's words. The
personal-question model (``core.personal``) is checked on questions it never saw; the routing on the fakes
(tests/fakes.py), the model itself on the real embedder in tests/model."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from fakes import ScriptedBackend, shortest_sentence

from localpager.core.personal import asks_about_self, asks_for_value, personal_model, value_model
from localpager.runtime.guard import RepetitionGuard
from localpager.runtime.prompts import NOT_REMEMBERED, QUOTE_OPENING


def _check() -> dict:
    return json.loads(resources.files("localpager.lab").joinpath("data", "personal_check.json").read_text("utf-8"))


def test_the_shipped_model_tells_personal_questions_it_never_saw_from_general_ones():
    data = _check()
    found = sum(asks_about_self(q) for q in data["personal"]) / len(data["personal"])
    wrong = sum(asks_about_self(q) for q in data["general"]) / len(data["general"])
    assert found >= 0.8 and wrong <= 0.05, (found, wrong)


def test_what_it_is_about_weighs_nothing_only_how_it_asks():
    model = personal_model()
    assert not any(f.startswith("c:") for f in model.weights)  # no content word has a weight
    assert asks_about_self("What is the name of my accountant?") and asks_about_self("Who is my doctor?")
    assert not asks_about_self("What is the name of the tallest accountant in history?")


def test_a_quoted_question_asks_nothing_about_the_speaker():
    assert not asks_about_self("Translate into German: \"What's my sister's name?\"")


@pytest.fixture
def chatty(fake_pager):
    """A model that answers everything with an invented value, opening as a fact answer does."""
    backend = ScriptedBackend()
    invented = f'{QUOTE_OPENING}: "Your husband is called Ethan."'

    def reply(prompt: str, grammar: str | None) -> str:
        return shortest_sentence(grammar) if grammar else invented

    backend.fallback = reply
    return fake_pager(backend=backend), backend


def test_a_personal_question_in_a_new_chat_is_not_remembered_and_the_model_is_not_asked(chatty):
    lp, backend = chatty
    conv = lp.conversation("c", create=True)
    answer = conv.ask("What is my husband's name?")
    assert answer.answer == NOT_REMEMBERED and answer.trace.trigger == "personal"
    assert answer.trace.decision == "unknown"


def test_a_general_question_is_still_the_models_but_never_opens_as_a_quote(chatty):
    lp, backend = chatty
    conv = lp.conversation("c", create=True)
    answer = conv.ask("How do I boil an egg?")
    assert answer.trace.trigger == "none" and answer.trace.decision == "answer"
    assert not answer.answer.lower().startswith(QUOTE_OPENING.lower())
    assert answer.answer == "Your husband is called Ethan."  # the opening dropped after the second try
    assert answer.trace.repeated == "quote opening dropped"


def test_the_guard_holds_back_an_answer_while_it_may_open_as_a_quote():
    shown: list[str] = []
    guard = RepetitionGuard(shown.append, claims=(QUOTE_OPENING,))
    for piece in ["You ", "told ", "me: ", "\"nothing\""]:
        guard(piece)
    assert shown == [] and guard.claims_memory
    guard = RepetitionGuard(shown.append, claims=(QUOTE_OPENING,))
    for piece in ["You ", "can ", "boil ", "it ", "for ", "nine ", "minutes."]:
        guard(piece)
    guard.flush()
    assert "".join(shown) == "You can boil it for nine minutes." and not guard.claims_memory


def test_the_value_model_tells_a_question_for_a_told_value_from_one_for_help_on_sets_it_never_saw():
    """The held-out kinds' fact questions ask for something told, their implicit ones for help that may depend on
    it; the written check set's personal questions ask for something told."""
    from localpager.lab.synthetic import generate_dataset

    probes = [p for c in generate_dataset(6, seed=300, kinds="heldout", questions="both") for p in c.probes
              if "kind" in p.extra]  # a planted fact's: asked (explicit, no style given) or implied
    said = {style: [asks_for_value(p.question) for p in probes if p.extra.get("style", "explicit") == style]
            for style in ("explicit", "implicit")}
    assert sum(said["explicit"]) / len(said["explicit"]) >= 0.85
    assert sum(said["implicit"]) / len(said["implicit"]) <= 0.2
    written = _check()["personal"]
    assert sum(map(asks_for_value, written)) / len(written) >= 0.9
    assert not any(f.startswith("c:") for f in value_model().weights)  # the frame only, as the personal model


def test_help_with_something_of_ones_own_is_the_models_when_memory_has_nothing(chatty):
    """"How do I stop my dog pulling on the lead?" asks about the speaker's dog, but for help: with nothing
    remembered it is answered as a general question is, not "I don't remember that"; a question for a told value
    still is."""
    lp, backend = chatty
    conv = lp.conversation("c", create=True)
    question = "How do I stop my dog pulling on the lead?"
    assert asks_about_self(question) and not asks_for_value(question)
    answer = conv.ask(question)
    assert answer.trace.decision == "answer" and answer.answer != NOT_REMEMBERED
    assert conv.ask("What is my dog called?").trace.decision == "unknown"  # "I don't remember that: ..."


def test_help_asked_unsaved_in_a_users_new_empty_chat_is_answered(chatty):
    """The split eval's way of asking (``remember=False``) in a new chat with no turn at all: the user's other chat
    found nothing for the help question, and the empty chat's own ranking (before: a TypeError over an empty turn
    table) has nothing either, so the model helps."""
    lp, backend = chatty
    old = lp.conversation("mon", create=True, user="alice")
    for text in ("The hallway could use a lighter colour.", "A lighter colour makes it feel wider."):
        old.add_turn("user" if "could" in text else "assistant", text)
    new = lp.conversation("tue", create=True, user="alice")
    answer = new.ask("How do I stop my dog pulling on the lead?", remember=False)
    assert answer.trace.decision == "answer" and answer.answer != NOT_REMEMBERED
    assert new.ask("What is my dog called?", remember=False).trace.decision == "unknown"


def test_a_question_naming_someone_who_speaks_asks_what_they_told(chatty):
    """The value model reads a chat user's own questions: LoCoMo's "When did John plan to return from his trip to
    Toronto and Vancouver?" read as asking for help, and below the floor the model answered it ("I'm going to be
    back in a couple of days.") instead of "not remembered". A question naming one of a transcript's speakers asks
    what they told."""
    lp, _ = chatty
    conv = lp.conversation("t", create=True)
    conv.add_turn("user", "I'm flying to Oslo next week for the conference.", speaker="Maria")
    conv.add_turn("assistant", "Safe travels, Maria!", speaker="John")
    question = "When did John plan to return from his trip to Toronto and Vancouver?"
    selector = lp.selector("t")
    assert not asks_for_value(question) and not selector.asks_for_value(question)  # the frame alone reads as help
    assert selector.names_speaker(question, conv.pager)  # ... but John speaks here
    assert not selector.names_speaker("How do I stop my dog pulling on the lead?", conv.pager)


def test_an_answer_from_the_chats_own_prompt_does_not_go_on_into_memorys_verdict(fake_pager):
    """After "I don't remember that" replies, a small model answers a general question and then copies the verdict:
    the answer ends where the verdict begins, and the trace says it was dropped."""
    backend = ScriptedBackend()
    tail = NOT_REMEMBERED.replace("'", "\u2019")  # however its apostrophe is written
    backend.fallback = lambda prompt, grammar: (shortest_sentence(grammar) if grammar
                                                else f"Boil water and vinegar in it, then rinse. {tail}")
    lp = fake_pager(backend=backend)
    streamed: list[str] = []
    answer = lp.conversation("c", create=True).ask("How do I descale a kettle?", on_text=streamed.append)
    assert answer.trace.decision == "answer" and answer.trace.repeated == "verdict dropped"
    assert answer.answer == "".join(streamed) == "Boil water and vinegar in it, then rinse."


def test_a_question_naming_someone_who_speaks_is_never_the_models_own_answer(chatty):
    """A question naming one of a transcript's people asks what they told: when the recall gate stays shut it still
    goes through a recall and the floor (trigger ``personal``), as a question about the user does, never straight
    to the model. Before, LoCoMo's "Why did Jon combine his clothing business with dance?" (Gina had) was the
    model's: "Jon: I think it's because of the creative freedom ...", spoken for him from nothing."""
    lp, backend = chatty
    conv = lp.conversation("t", create=True)
    conv.add_turn("user", "I opened a clothing store last spring and I run dance classes in the back.", speaker="Gina")
    conv.add_turn("assistant", "That sounds like a lot of fun, Gina!", speaker="Jon")
    question = "Why did Jon combine his clothing business with dance?"
    assert not asks_about_self(question) and lp.selector("t").names_speaker(question, conv.pager)
    answer = conv.ask(question, remember=False)
    assert answer.trace.trigger == "personal"
    assert answer.trace.decision in ("unknown", "recall") and "Ethan" not in answer.answer
    # a general question in the same transcript names nobody who speaks: still the model's
    assert conv.ask("How do I boil an egg?", remember=False).trace.trigger == "none"


def test_the_check_advice_is_written_apart_from_the_training_questions():
    """The new-chat check (``benchmarks/new_chat.py``) measures advice no model was fitted on."""
    advice = set(_check()["advice"])
    train = json.loads(resources.files("localpager.lab").joinpath("data", "personal_train.json").read_text("utf-8"))
    assert len(advice) >= 40 and not advice & {*train["personal"], *train["general"]}
    assert not advice & {*_check()["personal"], *_check()["general"]}
