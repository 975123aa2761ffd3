"""The lab's variants of the turn ranking (``lab.fusion``): other fusions and normalisations, one signal alone,
BM25's idf over the candidates only; each ranked by the product's own ``rank_turns`` through its settings and its
lexical index (the product's choice: tests/fast/test_ranking.py)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import pages_of, speaker_turns

from localpager.lab.fusion import CandidatesIndex, FusionSettings, fused_scores, fusion_settings, lexical_index
from localpager.retrieval.ranking import HybridSettings, LexicalIndex, TurnHit, rank_pages, rank_turns


def fixed_dense(scores: dict[int, float]):
    """A DenseScorer that knows its answers: lets the fusion be tested without the embedder."""
    return lambda question, turn_indices: {i: scores.get(i, 0.0) for i in turn_indices}


def test_idf_from_the_candidates_only():
    turns = speaker_turns([("A", "apples and pears"), ("B", "apples again"), ("A", "pears at last")])
    whole = LexicalIndex("c").scores("apples", [0, 1], turns)
    local = lexical_index("c", idf="candidates").scores("apples", [0, 1], turns)
    assert whole[1] > 0 and local[1] > 0 and whole != local  # 'apples' is in every candidate: lower idf
    with pytest.raises(ValueError, match="idf scope"):
        lexical_index(idf="pages")
    assert type(lexical_index("c")) is LexicalIndex and type(lexical_index("c", idf="candidates")) is CandidatesIndex


def test_the_candidates_idf_plugs_into_the_product_ranking():
    turns = speaker_turns([("A", "apples and pears"), ("B", "apples again"), ("A", "pears at last"), ("B", "ok")])
    pages = pages_of(turns, 2)
    index = lexical_index("c", idf="candidates")
    hits = rank_turns("apples", turns, pages, fixed_dense({}), index, fusion_settings("lexical"))
    local = index.scores("apples", [0, 1, 2, 3], turns)
    assert {h.turn: h.lexical for h in hits} == pytest.approx(local)


# -- fusion ----------------------------------------------------------------------------------------
def test_weighted_fusion_of_raw_cosine_and_the_question_normalised_bm25():
    dense, lexical = np.array([0.6, 0.2, 0.4]), np.array([0.0, 0.8, 0.1])
    fused = fused_scores(dense, lexical, fusion_settings("weighted", 0.5, "raw", "query", lexical_power=1.0))
    assert fused == pytest.approx([0.3, 0.5, 0.25])
    assert fused_scores(dense, lexical, fusion_settings("dense")) == pytest.approx(dense)
    assert fused_scores(dense, lexical, fusion_settings("lexical")) == pytest.approx(lexical)
    minmax = fused_scores(dense, lexical, fusion_settings("weighted", 0.5, "minmax", "minmax", lexical_power=1.0))
    assert minmax == pytest.approx([0.5, 0.5, 0.5 * 0.5 + 0.5 * 0.125])
    damped = fused_scores(dense, lexical, fusion_settings("weighted", 0.5, "raw", "query", lexical_power=2))
    assert damped == pytest.approx([0.3, 0.1 + 0.32, 0.2 + 0.005])


def test_rrf_gives_no_lexical_vote_to_turns_sharing_no_word():
    fused = fused_scores(np.array([0.9, 0.1]), np.array([0.0, 0.5]), fusion_settings("rrf", 0.5, rrf_k=1))
    assert fused == pytest.approx([0.5 / 2, 0.5 / 3 + 0.5 / 2])


def test_settings_are_checked():
    for bad in (dict(fusion="max"), dict(dense_norm="query"), dict(lexical_norm="raw"), dict(dense_weight=1.5),
                dict(lexical_norm="z", lexical_power=2.0)):
        with pytest.raises(ValueError):
            FusionSettings(**bad)


def test_the_default_variant_is_the_product_to_the_last_bit():
    rng = np.random.default_rng(0)
    for n in (0, 1, 7, 200):
        dense, lexical = rng.uniform(-0.2, 0.9, n), rng.uniform(0, 1, n) * (rng.uniform(0, 1, n) > 0.5)
        assert np.array_equal(FusionSettings().fuse(dense, lexical), HybridSettings().fuse(dense, lexical))
    product = {k: v for k, v in vars(FusionSettings()).items() if k in vars(HybridSettings())}
    assert product == vars(HybridSettings())


def test_a_one_signal_baseline_has_no_priors():
    assert (fusion_settings("dense").telling_weight, fusion_settings("lexical").speaker_weight) == (0.0, 0.0)
    assert fusion_settings("rrf").answer_type_weight == HybridSettings().answer_type_weight


def test_a_page_scores_as_its_best_fused_turn_and_only_given_pages_are_ranked():
    turns = speaker_turns([("A", f"filler line {i}") for i in range(8)])
    turns[5].text = "my locker code is 4471"
    pages = pages_of(turns, 2)  # p1: 0-1, p2: 2-3, p3: 4-5, p4: 6-7
    dense = fixed_dense({0: 0.5, 1: 0.1, 2: 0.45, 4: 0.2, 5: 0.3})
    even = fusion_settings("weighted", 0.5, "raw", "query", lexical_power=1.0)
    hits = rank_turns("what is my locker code", turns, pages[:3], dense, LexicalIndex("c"), even)
    assert {h.turn for h in hits} == set(range(6))  # page 4 was not asked about
    assert hits[0] == TurnHit(5, 3, pytest.approx(hits[0].score), 0.3, pytest.approx(hits[0].lexical))
    ranked = rank_pages("what is my locker code", turns, pages[:3], dense, LexicalIndex("c"), even)
    assert [(h.page_id, h.turn) for h in ranked] == [(3, 5), (1, 0), (2, 2)]
    dense_only = rank_pages("what is my locker code", turns, pages[:3], dense, LexicalIndex("c"),
                            fusion_settings("dense"))
    assert [h.page_id for h in dense_only] == [1, 2, 3]
    assert rank_pages("anything", turns, [], dense, LexicalIndex("c")) == []

