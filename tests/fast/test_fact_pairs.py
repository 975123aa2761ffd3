"""The pair bank's arithmetic (``retrieval.fact_pairs``), its shipped files, and that it stays off with an
embedder its vectors are not from. The real embedder's verdicts: tests/model/test_fact_pairs.py."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from localpager.core.facts import facts_of
from localpager.core.records import Turn
from localpager.retrieval import fact_pairs
from localpager.retrieval.fact_pairs import PairBank, bank_from, quantized, shipped_bank
from localpager.retrieval.facts import FactRanker


def unit(*rows):
    v = np.array(rows, dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def bank():
    # two labelled messages that need fact 0 and fact 1, and a general one that needs none
    return PairBank(messages=unit([1, 0, 0], [0, 1, 0], [0, 0, 1]), needs=np.array([0, 1, -1]),
                    statements=[unit([1, 0, 0]), unit([0, 1, 0], [0, 0.6, 0.8])], k=2, power=1.0, threshold=0.5,
                    probe="first")


def test_a_message_near_a_labelled_one_scores_the_fact_its_statements_match(bank):
    facts = unit([1, 0.1, 0], [0, 1, 0])
    scores = bank.scores(unit([1, 0.2, 0])[0], facts)
    assert scores[0] > bank.threshold > scores[1]
    assert np.argmax(bank.scores(unit([0.2, 1, 0])[0], facts)) == 1


def test_a_general_neighbour_weighs_in_but_adds_nothing(bank):
    facts = unit([1, 0, 0])
    near_fact = bank.scores(unit([1, 0, 0.3])[0], facts)[0]
    near_general = bank.scores(unit([0.3, 0, 1])[0], facts)[0]
    assert near_fact > 0.7 and near_general < 0.3


def test_leaving_a_message_out_removes_what_it_adds(bank):
    facts, message = unit([1, 0, 0]), unit([1, 0, 0.3])[0]
    kept = bank.scores(message, facts)[0]
    left = bank.scores(message, facts, leave_out=np.array([True, False, False]))[0]
    assert left < kept and left == pytest.approx(0.0, abs=1e-6)


def test_stored_vectors_come_back_as_the_unit_vectors_they_were():
    vectors = np.random.default_rng(0).normal(size=(5, 8)).astype(np.float32)
    data = {"messages": [["a", 0], ["b", None]], "statements": [["s", "t"], ["u"]], "k": 3, "power": 2.0,
            "threshold": 0.4}
    bank = bank_from(data, quantized(vectors))
    original = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert np.allclose(bank.messages, original[:2], atol=0.02)
    assert [len(s) for s in bank.statements] == [2, 1] and np.allclose(bank.statements[1], original[4:], atol=0.02)
    assert bank.needs.tolist() == [0, -1] and bank.probe == "a" and (bank.k, bank.power) == (3, 2.0)


def test_another_embedder_leaves_the_bank_off(bank):
    assert not bank.fits(lambda texts: np.ones((len(texts), 5)))  # another width
    assert not bank.fits(lambda texts: unit([0, 1, 0]))  # the same width, another vector for the probe
    assert bank.fits(lambda texts: unit([2, 0, 0]))


def test_the_shipped_bank_is_whole():
    bank = shipped_bank()
    assert bank is not None and len(bank.messages) > 1000
    assert bank.needs.max() == len(bank.statements) - 1 and (bank.needs == -1).sum() > 100
    assert all(len(s) for s in bank.statements) and 0 < bank.threshold < 1
    assert np.allclose(np.linalg.norm(bank.messages, axis=1), 1.0, atol=1e-4)


def test_a_ranker_with_another_embedder_is_the_fact_model_alone():
    facts = facts_of([Turn("user", "I'm allergic to kiwi.", 0)])
    rng = np.random.default_rng(1)
    ranker = FactRanker(facts, lambda texts: rng.normal(size=(len(texts), fact_pairs.shipped_bank().messages.shape[1])))
    assert ranker.pairs() is None
    hit = ranker.best("What should I avoid eating, for my sake?")
    assert hit.paired is None and not hit.by_pairs


def test_how_much_a_message_needs_a_fact_is_its_neighbours_share(bank):
    needed, nearest = bank.need_of(unit([1, 0, 0.3])[0])
    assert needed > 0.5 and nearest == pytest.approx(float(unit([1, 0, 0.3])[0][0]), abs=1e-5)
    general, _ = bank.need_of(unit([0.3, 0, 1])[0])
    assert general < 0.5


def test_unmet_needs_every_cut_off_met():
    bank = PairBank(messages=unit([1, 0]), needs=np.array([0]), statements=[unit([1, 0])],
                    unmet={"needed": 0.6, "nearest": 0.7, "paired": 0.4, "probability": 0.2})
    assert bank.unmet_by(0.9, 0.8, 0.1, 0.1)
    assert not bank.unmet_by(0.5, 0.8, 0.1, 0.1)  # its neighbours were mostly general questions
    assert not bank.unmet_by(0.9, 0.6, 0.1, 0.1)  # nothing in the bank is near it
    assert not bank.unmet_by(0.9, 0.8, 0.45, 0.1)  # a fact comes near what it needs
    assert not bank.unmet_by(0.9, 0.8, 0.1, 0.3)  # the fact model finds one likely
    assert not replace(bank, unmet={}).unmet_by(1.0, 1.0, 0.0, 0.0)  # no cut-offs: never


def test_a_fact_misses_by_every_cut_off_but_the_fact_model_s():
    bank = PairBank(messages=unit([1, 0]), needs=np.array([0]), statements=[unit([1, 0])],
                    unmet={"needed": 0.6, "nearest": 0.7, "paired": 0.4, "probability": 0.2})
    assert bank.misses(0.9, 0.8, 0.1)  # whatever the fact model's probability: it gave the fact, the bank says no
    assert not bank.misses(0.5, 0.8, 0.1) and not bank.misses(0.9, 0.6, 0.1) and not bank.misses(0.9, 0.8, 0.45)
    assert bank.misses(0.9, 0.8, 0.1) and not bank.unmet_by(0.9, 0.8, 0.1, 0.3)  # unmet asks the model too
    assert not replace(bank, unmet={}).misses(1.0, 1.0, 0.0)
