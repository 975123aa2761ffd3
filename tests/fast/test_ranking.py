"""Turn-level hybrid ranking (dense + BM25), shared by the reranker and the paging simulator: the logic, with
dense scores given (with the real embedder: tests/model/test_ranking.py; the lab's variants of it:
tests/fast/test_fusion.py)."""

from __future__ import annotations

import ast
import inspect

import numpy as np
import pytest
from helpers import pages_of, speaker_turns

from localpager.core.records import Turn
from localpager.core.text import content_words
from localpager.retrieval import ranking
from localpager.retrieval.ranking import HybridSettings, LexicalIndex, is_question, rank_turns


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


def test_an_empty_conversation_or_a_stopword_only_one_scores_zero():
    turns = speaker_turns([("A", "ok thanks"), ("B", "yes sure")])
    assert LexicalIndex().scores("what did I say", [0, 1], turns) == {0: 0.0, 1: 0.0}
    assert LexicalIndex().scores("anything", [], turns) == {}


# -- fusion ----------------------------------------------------------------------------------------
def test_the_product_fuses_min_max_cosines_with_the_damped_bm25_share():
    dense, lexical = np.array([0.6, 0.2, 0.4]), np.array([0.0, 0.8, 0.1])
    fused = HybridSettings(dense_weight=0.5, lexical_power=2.0).fuse(dense, lexical)
    assert fused == pytest.approx([0.5, 0.32, 0.25 + 0.005])
    assert HybridSettings(dense_weight=0.5, lexical_power=1.0).fuse(np.ones(2), lexical[:2]) == pytest.approx([0, 0.4])
    for bad in (dict(dense_weight=1.5), dict(lexical_power=0.0)):
        with pytest.raises(ValueError):
            HybridSettings(**bad)


def test_the_product_ranking_keeps_no_lab_variant():
    """The ranking is what the product runs: the lab's variants (other fusions and norms, the candidates' idf)
    live in lab.fusion and plug in through HybridSettings.fuse and LexicalIndex.candidate_scores; no choice
    enum comes back here."""
    tree = ast.parse(inspect.getsource(ranking))
    enums = [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
             and any(getattr(b, "id", getattr(b, "attr", "")) in ("StrEnum", "Enum") for b in node.bases)]
    assert enums == []
    imported = {a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for a in node.names}
    assert not imported & {"StrEnum", "Enum"}


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
