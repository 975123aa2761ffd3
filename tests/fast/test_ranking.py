"""Turn-level hybrid ranking (dense + BM25), shared by the reranker and the paging simulator: the logic, with
dense scores given (with the real embedder: tests/model/test_ranking.py)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import pages_of, speaker_turns

from localpager.core.records import Turn
from localpager.core.text import content_words
from localpager.retrieval.ranking import (
    HybridSettings,
    LexicalIndex,
    TurnHit,
    fused_scores,
    is_question,
    rank_pages,
    rank_turns,
    should_recall,
    trigger_features,
)


def fixed_dense(scores: dict[int, float]):
    """A DenseScorer that knows its answers: lets the fusion be tested without the embedder."""
    return lambda question, turn_indices: {i: scores.get(i, 0.0) for i in turn_indices}


# -- words and BM25 ---------------------------------------------------------------------------------
def test_terms_drop_stopwords_and_fold_endings():
    assert content_words("Melanie painted the sunsets while running", "light") == ("melani", "paint", "sunset", "run")
    assert content_words("She paints; painting calms her", "light") == ("paint", "paint", "calm")
    assert content_words("I carried the studied speed", "light") == ("carry", "study", "speed")
    assert content_words("Peanuts and parties", "plural") == ("peanut", "party")
    assert content_words("Peanuts", "none") == ("peanuts",)


def test_lexical_scores_are_a_share_of_what_the_question_could_score():
    turns = speaker_turns([("Caroline", "I went to an LGBTQ support group yesterday"),
                          ("Melanie", "I painted a lake sunset with the kids"),
                          ("Caroline", "That sounds lovely")])
    index = LexicalIndex("c")
    scores = index.scores("What did Melanie paint?", [0, 1, 2], turns)
    assert max(scores, key=scores.get) == 1 and 0 < scores[1] < 1
    assert scores[0] == 0.0  # shares no word, not even the speaker
    assert index.scores("quantum chromodynamics", [0, 1, 2]) == {0: 0.0, 1: 0.0, 2: 0.0}
    # a question word the conversation never used lowers the share: the question is about something new
    assert index.scores("What did Melanie paint in Lisbon?", [1])[1] < scores[1]


def test_speaker_names_are_part_of_the_lexical_document_only_when_asked_for():
    turns = speaker_turns([("Caroline", "I adopted a dog"), ("Melanie", "We adopted a dog")])
    with_names = LexicalIndex("c").scores("Which dog did Caroline adopt?", [0, 1], turns)
    without = LexicalIndex("c", speakers=False).scores("Which dog did Caroline adopt?", [0, 1], turns)
    assert with_names[0] > with_names[1]
    assert without[0] == pytest.approx(without[1])


def test_the_index_is_appended_to_as_the_conversation_grows():
    turns = speaker_turns([("A", "the garden fence needs paint"), ("B", "blue would suit it")])
    index = LexicalIndex("c")
    index.scores("fence paint", [0, 1], turns)
    grown = index._grown
    index.scores("blue fence", [0, 1], turns)
    assert index._grown is grown and grown.n == 2  # same conversation, same length: nothing indexed again
    turns.append(Turn("user", "the fence is finished", 2, speaker="A"))
    scores = index.scores("finished fence", [0, 1, 2], turns)
    assert index._grown is grown and grown.n == 3 and max(scores, key=scores.get) == 2  # the new turn appended


def test_idf_from_the_candidates_only():
    turns = speaker_turns([("A", "apples and pears"), ("B", "apples again"), ("A", "pears at last")])
    whole = LexicalIndex("c").scores("apples", [0, 1], turns)
    local = LexicalIndex("c", idf="candidates").scores("apples", [0, 1], turns)
    assert whole[1] > 0 and local[1] > 0 and whole != local  # 'apples' is in every candidate: lower idf
    with pytest.raises(ValueError, match="idf scope"):
        LexicalIndex(idf="pages")


def test_an_empty_conversation_or_a_stopword_only_one_scores_zero():
    turns = speaker_turns([("A", "ok thanks"), ("B", "yes sure")])
    assert LexicalIndex().scores("what did I say", [0, 1], turns) == {0: 0.0, 1: 0.0}
    assert LexicalIndex().scores("anything", [], turns) == {}


# -- fusion ----------------------------------------------------------------------------------------
def test_weighted_fusion_of_raw_cosine_and_the_question_normalised_bm25():
    dense, lexical = np.array([0.6, 0.2, 0.4]), np.array([0.0, 0.8, 0.1])
    fused = fused_scores(dense, lexical, HybridSettings("weighted", 0.5, "raw", "query", lexical_power=1.0))
    assert fused == pytest.approx([0.3, 0.5, 0.25])
    assert fused_scores(dense, lexical, HybridSettings("dense")) == pytest.approx(dense)
    assert fused_scores(dense, lexical, HybridSettings("lexical")) == pytest.approx(lexical)
    minmax = fused_scores(dense, lexical, HybridSettings("weighted", 0.5, "minmax", "minmax", lexical_power=1.0))
    assert minmax == pytest.approx([0.5, 0.5, 0.5 * 0.5 + 0.5 * 0.125])
    damped = fused_scores(dense, lexical, HybridSettings("weighted", 0.5, "raw", "query", lexical_power=2))
    assert damped == pytest.approx([0.3, 0.1 + 0.32, 0.2 + 0.005])


def test_rrf_gives_no_lexical_vote_to_turns_sharing_no_word():
    fused = fused_scores(np.array([0.9, 0.1]), np.array([0.0, 0.5]), HybridSettings("rrf", 0.5, rrf_k=1))
    assert fused == pytest.approx([0.5 / 2, 0.5 / 3 + 0.5 / 2])


def test_settings_are_checked():
    for bad in (dict(fusion="max"), dict(dense_norm="query"), dict(lexical_norm="raw"), dict(dense_weight=1.5),
                dict(lexical_norm="z", lexical_power=2.0)):
        with pytest.raises(ValueError):
            HybridSettings(**bad)


def test_a_page_scores_as_its_best_fused_turn_and_only_given_pages_are_ranked():
    turns = speaker_turns([("A", f"filler line {i}") for i in range(8)])
    turns[5].text = "my locker code is 4471"
    pages = pages_of(turns, 2)  # p1: 0-1, p2: 2-3, p3: 4-5, p4: 6-7
    dense = fixed_dense({0: 0.5, 1: 0.1, 2: 0.45, 4: 0.2, 5: 0.3})
    even = HybridSettings("weighted", 0.5, "raw", "query", lexical_power=1.0)
    hits = rank_turns("what is my locker code", turns, pages[:3], dense, LexicalIndex("c"), even)
    assert {h.turn for h in hits} == set(range(6))  # page 4 was not asked about
    assert hits[0] == TurnHit(5, 3, pytest.approx(hits[0].score), 0.3, pytest.approx(hits[0].lexical))
    ranked = rank_pages("what is my locker code", turns, pages[:3], dense, LexicalIndex("c"), even)
    assert [(h.page_id, h.turn) for h in ranked] == [(3, 5), (1, 0), (2, 2)]
    dense_only = rank_pages("what is my locker code", turns, pages[:3], dense, LexicalIndex("c"), HybridSettings("dense"))
    assert [h.page_id for h in dense_only] == [1, 2, 3]
    assert rank_pages("anything", turns, [], dense, LexicalIndex("c")) == []


def test_an_earlier_asking_of_the_question_is_no_answer_to_it():
    """Asked twice, the first asking matches best of all turns; it leaves the ranking, the fact ranks first. A
    question that says more than the question asks (a name) stays."""
    turns = [Turn("user", f"filler line {i}", i) for i in range(6)]
    turns[1].text = "Omar Sato takes care of our parrot."
    turns[3].text = "Who takes care of our parrot?"
    turns[4].text = "Is Omar taking care of the parrot?"
    dense = fixed_dense({1: 0.5, 3: 0.95, 4: 0.6})
    hits = rank_turns("Who takes care of our parrot?", turns, pages_of(turns, 2), dense, LexicalIndex("c"))
    assert 3 not in {h.turn for h in hits}
    assert hits[0].turn in (1, 4) and 4 in {h.turn for h in hits}
    assert len(hits) == 5


# -- trigger ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("Which snack should I avoid?", True),
    ("what was the name of that cafe", True),
    ("Remind me of the gate code.", True),
    ("Do you remember my sister's birthday", True),
    ("Didn't I say I was vegan", True),
    ("Is it raining", True),
    ("I painted the fence today.", False),
    ("Thanks, that helps!", False),
    ("Whatever works for you.", False),  # "whatever" is no wh-word
])
def test_question_form(text, expected):
    assert is_question(text) is expected


def test_trigger_features_and_the_rule():
    hits = [TurnHit(5, 3, 0.6, 0.5, 0.7), TurnHit(4, 3, 0.4, 0.6, 0.1), TurnHit(0, 1, 0.35, 0.2, 0.3)]
    f = trigger_features("Where did I park?", hits)
    assert (f.score, f.margin, f.dense, f.lexical, f.question, f.pages) == (0.6, pytest.approx(0.25), 0.6, 0.7, True, 2)
    rule = HybridSettings(question_threshold=0.5, statement_threshold=None)
    assert should_recall(f, rule)
    assert not should_recall(trigger_features("I parked downstairs.", hits), rule)  # not a question
    assert should_recall(trigger_features("I parked downstairs.", hits), HybridSettings(statement_threshold=0.6))
    assert not should_recall(f, HybridSettings(question_threshold=0.7))
    assert not should_recall(f, HybridSettings(question_threshold=0.5, min_margin=0.3))
    none = trigger_features("Where did I park?", [])
    assert none.pages == 0 and not should_recall(none, HybridSettings(question_threshold=0.0))


