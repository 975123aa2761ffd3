"""The relevance floor's reading of a question that names one of a transcript's speakers (``retrieval.answerable``):
who said what it asks about, and the threshold of its own. Pure arithmetic over given cosines: no embedder."""

from __future__ import annotations

import numpy as np
import pytest

from localpager.core.records import Turn
from localpager.retrieval.answerable import (CHAT_ANSWER_MODEL, DEFAULT_ANSWER_MODEL, NAMED_ANSWER_MODEL,
                                             AnswerFeatures, FloorModel, decide, lead, ranking_leads, speaker_gap,
                                             unnamed)
from localpager.retrieval.gate import GateModel

TURNS = [Turn("user", "Thanks, Melanie! The charity race made me realize self-care matters.", 0, speaker="Caroline"),
         Turn("assistant", "I painted a lake at sunrise last week.", 1, speaker="Melanie"),
         Turn("user", "My kids loved the camping trip.", 2, speaker="Caroline"),
         Turn("assistant", "Pottery keeps me calm.", 3, speaker="Melanie")]
SPOKEN = np.array(["caroline", "melanie", "caroline", "melanie"], dtype=object)


def test_a_question_without_the_speakers_names():
    speakers = ["caroline", "melanie", "john smith"]
    assert unnamed("What did Melanie realize after her charity race?", speakers) == \
        "What did realize after her charity race?"
    assert unnamed("Where is Caroline's necklace from, and did John Smith see it?", speakers) == \
        "Where is necklace from, and did see it?"
    assert unnamed("What did Maria paint?", speakers) == "What did Maria paint?"  # no speaker of this one


def _gap(named: str, dense: list[float]) -> float:
    asked = unnamed(f"What did {named.capitalize()} realize after the charity race?", ["caroline", "melanie"])
    return speaker_gap(asked, named, TURNS, np.arange(4), np.array(dense), SPOKEN)


def test_the_gap_is_below_zero_when_the_other_speaker_said_what_is_asked_about():
    dense = [0.62, 0.20, 0.25, 0.18]  # the race line is Caroline's
    assert _gap("melanie", dense) < -0.5 < 0.5 < _gap("caroline", dense)
    assert _gap("melanie", dense) == pytest.approx(-_gap("caroline", dense))


def test_the_gap_is_nothing_when_one_side_said_nothing():
    assert speaker_gap("race", "melanie", TURNS[:1], np.arange(1), np.array([0.6]), SPOKEN[:1]) == 0.0


def test_a_question_naming_a_speaker_is_judged_by_a_model_of_its_own():
    model = FloorModel({"dense": 1.0}, 0.0, threshold=0.2, named=GateModel({"dense": 1.0}, 0.0, threshold=0.6))
    middling = AnswerFeatures(dense=0.5)  # p = sigmoid(0.5) = 0.62
    assert decide(middling, model).answer
    assert decide(AnswerFeatures(dense=0.2, speaker_named=1.0), model).answer is False  # 0.55 < 0.6
    assert decide(AnswerFeatures(dense=0.2), model).answer  # p = 0.55: a chat's question clears 0.2
    plain = GateModel({"dense": 1.0}, 0.0, threshold=0.2)  # a plain model (a test's, an older one): one threshold
    assert decide(AnswerFeatures(dense=0.2, speaker_named=1.0), plain).answer


def test_the_shipped_floor_reads_the_gap_for_a_transcript_s_questions_only():
    assert DEFAULT_ANSWER_MODEL.named is NAMED_ANSWER_MODEL  # a chat's question has no gap (``speaker_gap``: 0)
    assert NAMED_ANSWER_MODEL.weights["speaker_gap"] > 0
    near = AnswerFeatures(dense=0.45, overlap=0.4, speaker_named=1.0, gate=0.9, fact=0.2)
    far_behind = AnswerFeatures(**{**near.__dict__, "speaker_gap": -0.6})
    assert decide(far_behind).probability < decide(near).probability
    chat = AnswerFeatures(dense=0.45, overlap=0.4, gate=0.9, fact=0.2)
    assert decide(chat).probability == CHAT_ANSWER_MODEL.probability(chat)  # a chat's floor is the one it had


def test_near_the_fact_questions_the_bank_knows_a_weak_recall_is_not_remembered_far_from_them_it_may_answer():
    # the same weak best turn and no fact: asked like the bank's fact questions, it was most likely never told;
    # far from anything the bank knows, it may be a kind of fact the bank never saw, and a recall may answer it
    weak = dict(dense=0.25, overlap=0.1, gate=0.8, fact=0.1)
    near = AnswerFeatures(**weak, needed=1.0, nearest=0.9)
    far = AnswerFeatures(**weak, needed=1.0, nearest=0.3)
    assert decide(near).probability < decide(far).probability
    assert not decide(near).answer and decide(far).answer


def test_without_a_pair_bank_the_need_counts_as_its_mean_and_the_trace_leaves_it_out():
    unread = AnswerFeatures(dense=0.3, overlap=0.2, gate=0.8, fact=0.1)  # another embedder: no bank, None
    means = AnswerFeatures(**{**unread.__dict__, "needed": CHAT_ANSWER_MODEL.means["needed"],
                              "nearest": CHAT_ANSWER_MODEL.means["nearest"]})
    assert decide(unread).probability == pytest.approx(decide(means).probability)
    assert "needed" not in decide(unread).to_dict()["features"]


def test_the_lead_is_how_far_the_best_stands_above_the_next_ones_in_their_spread():
    alike = np.array([0.50, 0.49, 0.48, 0.50, 0.47, 0.49, 0.48])  # one of many alike
    ahead = np.array([0.80, 0.49, 0.48, 0.50, 0.47, 0.49, 0.48])
    assert lead(0.50, alike) < 1.0 < 10.0 < lead(0.80, ahead)
    assert lead(0.80, ahead) == lead(0.80, ahead[::-1])  # the order the candidates come in does not matter
    assert lead(0.9, np.array([0.9, 0.1, 0.2])) == 0.0  # too few after it to have a spread
    assert lead(5.0, np.r_[5.0, np.zeros(30)]) == 15.0  # bounded: a lone match does not swamp the rest
    many = np.r_[0.8, np.linspace(0.0, 0.5, 10_000)]  # only the next LEAD_OF - 1 count, not the long tail
    assert lead(0.8, many) == lead(0.8, np.r_[0.8, np.sort(many)[-20:-1]])
    assert ranking_leads(0.8, 0.5, ahead, alike) == (lead(0.8, ahead), lead(0.5, alike))


def test_the_same_weak_turn_answers_when_it_stands_out_and_is_not_remembered_when_it_is_one_of_many():
    # "When's my weekly vinyasa?" with a tax deadline as the best of many dated turns, against a turn the ranking
    # puts far ahead of the rest
    weak = dict(dense=0.28, overlap=0.2, gate=0.8, fact=0.1, needed=0.9, nearest=0.6)
    alike = AnswerFeatures(**weak, lead=1.5, dense_lead=0.5)
    ahead = AnswerFeatures(**weak, lead=9.0, dense_lead=4.0)
    assert not decide(alike).answer and decide(ahead).answer
    unread = AnswerFeatures(**weak)  # a floor asked without a ranking: the lead counts as its mean
    means = AnswerFeatures(**weak, lead=CHAT_ANSWER_MODEL.means["lead"],
                           dense_lead=CHAT_ANSWER_MODEL.means["dense_lead"])
    assert decide(unread).probability == pytest.approx(decide(means).probability)
