"""The recall decision without a model: answer types, the ranking's priors, the gate's features and model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from localpager.core.answer_types import asked_groups, asks_for_several, match, stated_types
from localpager.core.records import Page, Turn
from localpager.lab.fusion import fusion_settings
from localpager.retrieval.gate import (
    DEFAULT_MODEL,
    FEATURES,
    GateFeatures,
    GateModel,
    decide,
    gate_features,
    message_features,
)
from localpager.retrieval.ranking import HybridSettings, LexicalIndex, TurnHit, rank_turns, tells


# -- answer types ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("question", "wanted"), [
    ("How much can I spend on the laptop?", {"money", "quantity", "number"}),  # "spend": money; "how much": any amount
    ("What can I afford for the trip?", {"money"}),
    ("When is the report due?", {"date", "time"}),
    ("What time is my dentist appointment?", {"time"}),
    ("Who should I call about the lease?", {"person"}),
    ("Where did I park?", {"place", "number"}),
    ("Which room am I in?", {"number"}),
    ("Which medicine must a doctor never prescribe me?", {"medicine", "avoid"}),
    ("What should I keep away from at the party?", {"avoid"}),
    ("What's my favourite kind of music?", {"liking"}),
    ("Text me a reminder with my dentist time.", {"time"}),  # "text me" asks for no one
    ("Which four-legged friend is off the cards for me?", {"avoid"}),
])
def test_a_question_asks_for_the_types_that_answer_it(question: str, wanted: set[str]) -> None:
    assert set().union(*asked_groups(question)) == wanted


def test_when_inside_a_sentence_is_no_question_of_time() -> None:
    assert asked_groups("Tell me what to warn the waiter about when I order.") == (frozenset({"avoid"}),)
    assert asked_groups("Remind me when the piano lesson is.") == (frozenset({"date", "time"}),)


@pytest.mark.parametrize(("text", "kinds"), [
    ("I can spend at most $1,500 on a new laptop.", {"money"}),
    ("My dentist appointment is on Friday at 3:30 pm.", {"date", "time"}),
    ("My landlord is Omar Haddad, on 555-0134.", {"person"}),
    ("I take 10 mg of lisinopril every morning.", {"medicine", "quantity"}),
    ("I'm badly allergic to sesame and carry an EpiPen.", {"avoid"}),
    ("Nothing beats Thai food for me, it's my favourite.", {"liking"}),
    ("I went there yesterday.", {"date"}),
])
def test_a_turn_states_facts_of_its_types(text: str, kinds: set[str]) -> None:
    assert kinds <= stated_types(text)


def test_match_is_the_share_of_the_asked_cues_a_turn_answers() -> None:
    question = "Which medicine must a doctor never prescribe me?"
    assert match(question, "I'm allergic to penicillin, it is a medicine I react to.") == 1.0
    assert match(question, "I take lisinopril for my blood pressure.") == 0.5
    assert match(question, "The weather is lovely.") == 0.0
    assert match("Tell me about yourself.", "I take lisinopril.") == 0.0  # asks for no type


@pytest.mark.parametrize(("question", "several"), [
    ("What activities does Melanie partake in?", True),
    ("Where has Melanie camped?", True),
    ("Which cities have both Jon and Gina visited?", True),
    ("How many children does Melanie have?", True),
    ("What did Caroline research?", False),
    ("What is my budget for the laptop?", False),
    ("When did Caroline go to the support group?", False),
])
def test_questions_that_ask_for_several_things(question: str, several: bool) -> None:
    assert asks_for_several(question) is several


# -- the ranking's priors -------------------------------------------------------------------------------------
def test_a_turn_that_tells_and_asks_nothing() -> None:
    assert tells(Turn("user", "I'm allergic to sesame.", 0))
    assert tells(Turn("user", "Before I forget, one thing. I take metoprolol.", 0))  # a lead-in asks nothing
    assert not tells(Turn("user", "We're hosting a party. What snacks are easy?", 0))
    assert not tells(Turn("assistant", "Noted, I will remember.", 0))
    assert tells(Turn("assistant", "I went hiking yesterday.", 0, speaker="Melanie"))  # a named person


def test_the_turn_stating_the_asked_type_outranks_one_nearer_in_words() -> None:
    """The filler turn is nearer to the question in cosine; the fact states something to avoid, as asked."""
    turns = [Turn("user", "We're hosting a party on Saturday. What snacks are easy?", 0),
             Turn("assistant", "Popcorn and pretzels are easy.", 1),
             Turn("user", "I'm badly allergic to sesame and carry an EpiPen everywhere.", 2),
             Turn("assistant", "Noted.", 3)]
    pages = [Page(1, 0, 1, evicted=True), Page(2, 2, 3, evicted=True)]
    cosines = {0: 0.77, 1: 0.44, 2: 0.37, 3: 0.05}

    def dense(question, indices):
        return {i: cosines[i] for i in indices}

    question = "What must never end up on my plate?"  # no word in common: the cosines decide, then the types
    before = HybridSettings(telling_weight=0.0, answer_type_weight=0.0, speaker_weight=0.0)
    assert rank_turns(question, turns, pages, dense, LexicalIndex(), before)[0].turn == 0
    assert rank_turns(question, turns, pages, dense, LexicalIndex(), HybridSettings())[0].turn == 2
    # the one-signal baselines stay what they are
    assert rank_turns(question, turns, pages, dense, LexicalIndex(), fusion_settings("dense"))[0].turn == 0


def test_a_turn_by_the_speaker_the_question_names_is_preferred() -> None:
    turns = [Turn("user", "I painted a sunset last week.", 0, speaker="Caroline"),
             Turn("assistant", "I painted a sunset last week.", 1, speaker="Melanie")]
    pages = [Page(1, 0, 0, evicted=True), Page(2, 1, 1, evicted=True)]

    def dense(question, indices):
        return dict.fromkeys(indices, 0.5)

    hits = rank_turns("What did Melanie paint?", turns, pages, dense, LexicalIndex(speakers=False), HybridSettings())
    assert hits[0].turn == 1


# -- the gate ---------------------------------------------------------------------------------------------------
def test_the_messages_own_words_are_read() -> None:
    general = message_features("How do I tie a tie?")
    assert general.question and general.general_form and general.i and not general.my
    memory = message_features("Tell me the plumber's number")
    assert memory.request and memory.definite and not memory.question
    assert message_features("Is it safe to leave a phone in a gym locker?").indefinite
    assert message_features("Can you rewrite this email for me?").task


def test_features_from_the_ranking_and_the_conversation() -> None:
    turns = [Turn("user", "My locker is 153.", 0), Turn("assistant", "Noted.", 1),
             Turn("user", "The Hartley deck is due Friday.", 2)]
    hits = [TurnHit(0, 1, 0.9, 0.6, 0.3), TurnHit(2, 2, 0.2, 0.1, 0.0), TurnHit(1, 1, 0.1, 0.05, 0.0)]
    f = gate_features("Which locker number is mine for the Hartley gym?", hits, turns)
    assert f.dense_best == 0.6 and f.lexical_best == 0.3 and f.best_tells == 1.0
    assert f.best_type == 1.0  # asks for a number, the best turn states one
    assert f.known_name == 1.0 and f.speaker == 0.0
    assert f.dense_z > 1  # the best turn stands out
    assert f.vector() == [getattr(f, name) for name in FEATURES]


def test_the_model_is_a_logistic_one_and_its_threshold_decides() -> None:
    model = GateModel(weights={"question": 2.0}, bias=-1.0, threshold=0.5)
    yes, no = GateFeatures(question=1.0), GateFeatures(question=0.0)
    assert model.probability(yes) == pytest.approx(1 / (1 + math.exp(-1)))
    assert decide(yes, model).recall and not decide(no, model).recall
    verdict = decide(yes, model).to_dict()
    assert verdict["recall"] is True and verdict["threshold"] == 0.5 and verdict["features"]["question"] == 1.0


def test_the_shipped_model_knows_every_feature() -> None:
    assert set(DEFAULT_MODEL.weights) == set(DEFAULT_MODEL.means) == set(DEFAULT_MODEL.scales) == set(FEATURES)
    assert 0 < DEFAULT_MODEL.threshold < 1
    # a question about the user's own thing scores above the same words asked in general
    hits = [TurnHit(0, 1, 0.5, 0.55, 0.2), TurnHit(1, 1, 0.1, 0.1, 0.0), TurnHit(2, 2, 0.1, 0.12, 0.0)]
    turns = [Turn("user", "My locker at the gym is 153.", 0), Turn("assistant", "Noted.", 1),
             Turn("user", "The weather is nice.", 2)]
    mine = DEFAULT_MODEL.probability(gate_features("Which locker is mine at the gym?", hits, turns))
    anyone = DEFAULT_MODEL.probability(gate_features("How do gym lockers with codes work?", hits, turns))
    assert mine > DEFAULT_MODEL.threshold > anyone
    assert np.isfinite(mine)
