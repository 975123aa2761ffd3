"""A statement its speaker hedges is no standing fact and replaces none (issue 38, item 2: "an uncertain one");
a firm statement in the same frames stays one.

The sentences here were written for these tests: the hedge model (``core.hedges``) was fitted on
``lab/data/hedges_train.json`` and measured on ``hedges_check.json``, never on these. Each hedged one was a fact
before the model read it (``test_each_hedged_sentence_here_reads_as_a_fact_without_the_hedge_model``), so every
assertion below could fail.
"""

from __future__ import annotations

import json
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localpager.core import facts as facts_module
from localpager.core.facts import extract, facts_of
from localpager.core.hedges import HedgeModel, hedged, shipped_model
from localpager.core.records import Turn
from localpager.core.syntax import hedge_features

HEDGED = [
    "I'm allergic to cats, but I'm not sure.",
    "I may be lactose intolerant, the tests are next week.",
    "I'm probably moving to Leeds in May.",
    "My door code is 4471, I think.",
    "Maybe our dentist is Dr Ferreira.",
    "I believe my landlord is Marco Bellini.",
    "We might move to Lyon in the spring.",
    "My sister could be pregnant.",
    "I'm fairly sure my passport number ends in 4471.",
    "My friend swears she's allergic to cats, but I doubt it.",  # a doubt about a claim relayed
    "My door code is 4471 now, I think, or maybe 4417.",  # "I think" parsed as a side clause
    "I'm unsure, but my son might be allergic to penicillin.",  # the doubt a clause before the claim, "unsure"
]
FIRM = [
    "I can't eat gluten.",
    "I could eat sushi every night.",  # "could" + a verb: no doubt, as "could be" is
    "I must take a statin every evening.",
    "I would never eat tripe again.",
    "I'm sure my flight is at 6am.",
    "I think of Porto as my second home.",  # "think" naming something: no frame around a claim
    "I'm vegetarian, but I might try fish.",  # the doubt is about a clause beside the fact
    "My debit card is from Triodos Bank, the bright one you've probably seen.",  # about the listener, in a relative
    "We moved so the kids could go to Oakfield Primary.",  # why, not whether
]


def user(text: str, index: int = 0) -> Turn:
    return Turn(role="user", text=text, index=index)


@pytest.mark.parametrize("sentence", HEDGED)
def test_a_hedged_statement_is_no_fact(sentence):
    assert hedged(sentence)
    assert extract(user(sentence)) == []


@pytest.mark.parametrize("sentence", FIRM)
def test_a_firm_statement_in_the_same_frames_stays_a_fact(sentence):
    assert not hedged(sentence)
    assert extract(user(sentence))


def test_each_hedged_sentence_here_reads_as_a_fact_without_the_hedge_model(monkeypatch):
    """The tests above could fail: without the hedge reading, every hedged sentence here was a fact."""
    monkeypatch.setattr(facts_module, "hedged", lambda sentence: False)
    facts_module._extract.cache_clear()
    try:
        assert all(extract(user(s)) for s in HEDGED)
    finally:
        facts_module._extract.cache_clear()


@pytest.mark.parametrize("older, hedge, word", [
    ("I'm badly allergic to sesame.", "Perhaps I'm not allergic to sesame anymore.", "sesame"),
    ("I'm badly allergic to sesame.", "I guess I'm no longer allergic to sesame.", "sesame"),
    ("My door code is 1942.", "My door code is 4471, I think.", "code"),
    ("My door code is 1942.", "My door code is 4471 now, I think, or maybe 4417.", "code"),
])
def test_a_hedged_change_replaces_no_fact(older, hedge, word):
    facts = facts_of([user(older, 0), user(hedge, 1)])
    assert [f.turn for f in facts if f.current and word in f.text] == [0]


def test_the_same_change_said_firmly_replaces_it():
    """The control: the change itself, said without a doubt, is a fact and replaces the older one."""
    facts = facts_of([user("My door code is 1942.", 0), user("My door code is 4471 now.", 1)])
    assert [f.turn for f in facts if f.current and "code" in f.text] == [1]


@pytest.mark.parametrize("line", ["My sister is probably moving to Leeds in May.",
                                  "Maybe my brother lives in Leeds now."])
def test_a_transcripts_speaker_hedging_states_no_fact_either(line, monkeypatch):
    said = Turn(role="user", text=line, index=0, speaker="Caroline")
    assert extract(said) == []
    monkeypatch.setattr(facts_module, "hedged", lambda sentence: False)
    facts_module._extract.cache_clear()
    try:
        assert extract(said)  # a fact without the hedge reading
    finally:
        facts_module._extract.cache_clear()


def test_no_parse_is_asked_of_a_sentence_without_a_doubting_word():
    """``may_hedge`` is exact: a sentence it passes over could not reach the threshold with any parse. Checked on
    every sentence the model was fitted and measured on."""
    model = shipped_model()
    data = [json.loads(resources.files("localpager.lab").joinpath("data", f"hedges_{name}.json").read_text())
            for name in ("train", "check")]
    for sentence in (s for d in data for s in d["hedged"] + d["firm"]):
        if not model.may_hedge(sentence):
            assert model.probability(hedge_features(sentence)) < model.threshold, sentence


def test_a_frame_the_model_never_saw_weighs_nothing():
    model = HedgeModel({"md:might:be": 3.0}, -1.0, 0.5)
    assert model.hedged("I might be allergic to cats.")
    assert not model.hedged("I'll be in Leeds.")
    assert not model.may_hedge("I'll be in Leeds.")  # no "might": not parsed


def test_the_training_and_check_sentences_are_apart_and_labelled_once():
    data = {name: json.loads(resources.files("localpager.lab").joinpath("data", f"hedges_{name}.json").read_text())
            for name in ("train", "check")}
    for d in data.values():
        assert d["about"] and d["hedged"] and d["firm"]
        assert not set(d["hedged"]) & set(d["firm"])
    train = set(data["train"]["hedged"] + data["train"]["firm"])
    assert not train & set(data["check"]["hedged"] + data["check"]["firm"])
    assert not train & set(HEDGED + FIRM)


_WORDS = st.sampled_from(["I", "might", "be", "think", "not", "sure", ",", "my", "code", "is", "4471", "you", "said",
                          "maybe", "could", "?", "probably", "doubt", "it", "if", "remember", "right", "\n", "\u00e9"])


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.text(max_size=200), st.lists(_WORDS, max_size=30).map(" ".join)))
def test_any_text_reads_as_hedged_or_not_and_extracts_without_error(text):
    assert hedged(text) in (True, False)
    assert isinstance(extract(user(text)), list)
