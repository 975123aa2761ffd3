"""Turn-level hybrid ranking with the real embedder: BM25 finds what dense ranks low, dense finds paraphrases, and
the simulator's rerank column is this ranking (the logic: tests/fast/test_ranking.py; the lab's baselines:
lab.fusion)."""

from __future__ import annotations

import pytest
from helpers import pages_of, speaker_turns

from localpager.core.records import Turn
from localpager.lab.fusion import fusion_settings
from localpager.retrieval.ranking import HybridSettings, LexicalIndex, embedding_scorer, rank_pages, rank_turns

# LoCoMo-style: the question reuses the evidence's words and names a speaker, while short exclamations
# ("Wow, Caroline, that looks amazing!") embed close to any question about Caroline.
LOCOMO_STYLE = [
    ("Caroline", "Hey Mel! Long week, but a good one."),
    ("Melanie", "Wow, Caroline, that looks amazing! What inspired it?"),
    ("Caroline", "Thanks! I painted it after the support group meeting."),
    ("Melanie", "That's awesome, Caroline! How did it feel to share it?"),
    ("Caroline", "Yeah, I'm lucky to have my friends. They've been there through everything; I've known them "
                 "for 4 years, since I moved from Sweden. I'm super thankful. Who supports you, Mel?"),
    ("Melanie", "My husband and the kids, always."),
    ("Caroline", "Wow, Melanie, that's so sweet! What happened that made you realize it?"),
    ("Melanie", "We went camping and roasted marshmallows by the fire."),
    ("Caroline", "That sounds so fun! Where did you go?"),
    ("Melanie", "A lake up north, the kids loved it."),
]


# Generated-style: the question paraphrases the fact, and small talk shares its generic words.
PARAPHRASE = [
    ("user", "How do I find more time to read?"),
    ("assistant", "Swap ten minutes of scrolling for a book before bed."),
    ("user", "I left the car in bay C41, level two."),
    ("assistant", "Noted."),
    ("user", "I can never find my reading glasses."),
    ("assistant", "A hook by the door helps."),
    ("user", "Is it worth paying for a password manager?"),
    ("assistant", "Yes, it saves you from reusing passwords."),
]


@pytest.fixture(scope="module")
def embedder():
    from localpager.retrieval.embedder import default_embedder

    return default_embedder()


def ranks(question, turns, pages, embedder, settings):
    hits = rank_pages(question, turns, pages, embedding_scorer(embedder, turns), LexicalIndex("t"), settings)
    return [h.page_id for h in hits]


@pytest.mark.embedder
def test_hybrid_finds_a_turn_that_reuses_the_question_words_when_dense_ranks_it_low(embedder):
    turns = speaker_turns(LOCOMO_STYLE)
    pages = pages_of(turns, 2)
    question = "Where did Caroline move from 4 years ago?"
    evidence = 3  # turn 4's page
    assert ranks(question, turns, pages, embedder, fusion_settings("dense")).index(evidence) >= 2
    assert ranks(question, turns, pages, embedder, HybridSettings())[0] == evidence


@pytest.mark.embedder
def test_hybrid_still_finds_a_paraphrase_only_dense_matches(embedder):
    turns = [Turn(role, text, i) for i, (role, text) in enumerate(PARAPHRASE)]
    pages = pages_of(turns, 2)
    question = "Where will I find my vehicle when I come back from the mall?"
    evidence = 2  # turn 2's page
    assert ranks(question, turns, pages, embedder, fusion_settings("lexical"))[0] != evidence
    assert ranks(question, turns, pages, embedder, fusion_settings("dense"))[0] == evidence
    assert ranks(question, turns, pages, embedder, HybridSettings())[0] == evidence


@pytest.mark.embedder
def test_the_simulators_rerank_column_is_this_ranking(embedder):
    from localpager.lab.retrievers import get_retriever

    turns = speaker_turns(LOCOMO_STYLE)
    pages = pages_of(turns, 2)
    for p in pages:
        p.text = "\n".join(turns[i].render() for i in p.turn_range)
    question = "Where did Caroline move from 4 years ago?"
    expected = ranks(question, turns, pages, embedder, HybridSettings())[:3]
    rerank = get_retriever("rerank")
    assert rerank.retrieve(question, pages, 3, turns=turns, key="conv") == expected
    assert rerank.retrieve(question, pages, 3) == expected  # turns read back from the pages' "who: text" lines
    assert get_retriever("dense").retrieve(question, pages, 3, turns=turns, key="conv") == \
        ranks(question, turns, pages, embedder, fusion_settings("dense"))[:3]


@pytest.mark.embedder
def test_a_question_asked_before_ranks_the_fact_first_not_its_first_asking(embedder):
    """With the real embedder an earlier asking of the question is its nearest turn by far; it is left out, and
    the turn that states the fact ranks first."""
    lines = PARAPHRASE[:2] + [("user", "Omar Sato takes care of our parrot while we travel.")] + PARAPHRASE[3:]
    lines += [("user", "Who takes care of our parrot?"), ("assistant", "I'm not sure.")]
    turns = [Turn(role, text, i) for i, (role, text) in enumerate(lines)]
    pages = pages_of(turns, 2)
    question = "Who takes care of our parrot?"
    dense = embedding_scorer(embedder, turns)
    assert max(dense(question, list(range(len(turns)))).items(), key=lambda kv: kv[1])[0] == 8  # the repeat
    hits = rank_turns(question, turns, pages, dense, LexicalIndex("t"))
    assert 8 not in [h.turn for h in hits] and hits[0].turn == 2
