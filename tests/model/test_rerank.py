"""Reranking with the real embedder, the real FAISS index and the real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from localpager.core.pager import PagingConfig, page_conversation
from localpager.core.records import Turn
from localpager.memory.api import LocalPager
from localpager.retrieval.index import PageIndex
from localpager.retrieval.ranking import best_per_page, rank_turns
from localpager.lab.selectors import lab_selector
from localpager.retrieval.rerank import RerankSelector

# the real embedder, and the GGUF model: `paged` counts tokens with its tokenizer, two tests answer with it
pytestmark = [pytest.mark.embedder, pytest.mark.model]

FILLER = [
    "The train to the coast leaves every hour and the schedule changes on Sundays.",
    "I repainted the fence green last weekend, it took two coats.",
    "My sister's new apartment has a tiny balcony with a view of the river.",
    "The football match went to extra time and ended in penalties.",
    "We watched a documentary about deep sea creatures with glowing skin.",
]
ALLERGY = "I'm seriously allergic to peanuts, even a trace sends me to the ER."
BUDGET = "For the kitchen remodel I have $23,500 set aside and not a cent more."


def conversation_turns():
    texts = []
    for block in range(6):
        for i in range(10):
            texts.append(FILLER[(block + i) % len(FILLER)] + f" ({block}.{i})")
    texts[23] = ALLERGY  # page 3 (fixed_10)
    texts[44] = BUDGET  # page 5
    return [Turn("user" if i % 2 == 0 else "assistant", t, i) for i, t in enumerate(texts)]


@pytest.fixture
def paged(store, counter):
    from localpager.retrieval.embedder import default_embedder

    turns = conversation_turns()
    pager = page_conversation(turns, counter, PagingConfig(boundary="fixed_10", budget=120))
    store.save_conversation("c", turns, pager.pages)
    return store, pager, PageIndex(store, default_embedder())


@pytest.mark.parametrize("question,page", [
    ("Which snack should I avoid bringing to the party?", 3),
    ("How much can I spend on new cabinets?", 5),
])
def test_consequence_questions_find_the_right_page(paged, question, page):
    store, pager, index = paged
    assert {3, 5} <= {p.page_id for p in pager.evicted}
    selector = lab_selector(index, "c", page_choice="rerank")
    injections, candidates = selector.select(question, [], pager, room=500)
    assert injections[0].page.page_id == page
    assert candidates[0].page_id == page and candidates[0].injected
    # the candidates are the top 3 pages of the hybrid ranking (every page but the question), best first,
    # each scored by its best turn; ``similarity`` is that turn's cosine with the question
    ranked = best_per_page(rank_turns(question, pager.turns, pager.pages, selector._dense(pager), selector.lexical))
    assert [(c.page_id, c.score) for c in candidates] == [(h.page_id, round(h.score, 4)) for h in ranked[:3]]
    assert [c.similarity for c in candidates] == [round(h.dense, 4) for h in ranked[:3]]
    cosines = index.turn_scores("c", question, [page])
    assert candidates[0].similarity == round(cosines[injections[0].turns[0]], 4)
    best_turn = injections[0].turns  # excerpt 0: only the best-matching turn
    assert pager.turns[best_turn[0]].text in (ALLERGY, BUDGET)


def test_model_named_pages_get_the_bonus_but_similarity_can_overrule(paged):
    store, pager, index = paged
    selector = RerankSelector(index, "c")  # the product's: the model's pages and the ranking's best
    injections, candidates = selector.select("Which snack should I avoid bringing?", [1], pager, room=500)
    named = next(c for c in candidates if c.page_id == 1)
    unnamed = lab_selector(index, "c", page_choice="rerank")
    fused = {h.page_id: h.score for h in best_per_page(unnamed._ranked(
        "Which snack should I avoid bringing?", pager, pager.pages))}
    assert named.named_by_model and named.score == pytest.approx(fused[1] + 0.05, abs=1e-3)
    assert injections[0].page.page_id == 3


def test_deleting_the_index_file_gives_the_same_ranking(paged):
    store, pager, index = paged
    evicted = [p.page_id for p in pager.evicted]
    index.update("c", pager.evicted, pager.turns, pager.bookmark)
    first = [(h.page_id, round(h.score, 5)) for h in index.rank("c", "snack to avoid", evicted)]
    path = Path(f"{store.path}.turn.faiss")
    assert path.exists()
    path.unlink()
    fresh = PageIndex(store, index.embedder)
    assert [(h.page_id, round(h.score, 5)) for h in fresh.rank("c", "snack to avoid", evicted)] == first
    path.write_bytes(b"corrupt")
    assert [(h.page_id, round(h.score, 5)) for h in PageIndex(store, index.embedder).rank(
        "c", "snack to avoid", evicted)] == first


def test_every_signal_is_stored_in_sqlite(paged):
    from localpager.retrieval.choices import Signal

    store, pager, index = paged
    index.update("c", pager.evicted, pager.turns, pager.bookmark)
    n_turns = sum(len(p.turn_range) for p in pager.evicted)
    assert len(store.embedding_rows("turn", "c")) == n_turns
    # recall ranks turns: the long whole-page texts are embedded only when a signal asks for them
    assert store.embedding_rows("text", "c") == [] and store.embedding_rows("bookmark", "c") == []
    assert index.update("c", pager.evicted, pager.turns, pager.bookmark, Signal) == 2 * len(pager.evicted)
    assert len(store.embedding_rows("bookmark", "c")) == len(pager.evicted)
    assert len(store.embedding_rows("text", "c")) == len(pager.evicted)
    assert index.update("c", pager.evicted, pager.turns, pager.bookmark, Signal) == 0  # nothing stale


def test_a_general_question_the_gate_would_page_in_is_overruled_by_the_pair_bank(paged):
    """Messages like it needed no fact (``facts.NOTHING_NEEDED``): nothing is paged in, and the trace says why.
    Questions about what was said keep the gate's verdict."""
    from localpager.retrieval.facts import NOTHING_NEEDED
    from localpager.runtime.trace import Trace, format_trace

    store, pager, index = paged
    selector = RerankSelector(index, "c")
    question = "How do I stop my sister's balcony plants from dying?"
    assert not selector.should_recall(question, pager)
    gate = selector.last_gate
    assert gate.probability >= gate.threshold + 0.05 and not gate.recall  # the gate alone would page in
    assert gate.needed is not None and gate.needed <= NOTHING_NEEDED - 0.1
    trace = Trace(turn=len(pager.turns), question=question)
    trace.gate = gate.to_dict()
    assert "messages like it needed no fact" in format_trace(trace.to_dict())
    for asked in ("Which snack should I avoid bringing to the party?", "How much can I spend on new cabinets?",
                  "What did I say about peanuts?"):
        assert selector.should_recall(asked, pager) and selector.last_gate.needed is None


def test_no_evicted_pages_means_no_recall(tmp_path, backend):
    lp = LocalPager(tmp_path / "s.db", backend=backend)
    chat = lp.conversation("c", create=True)
    chat.add_turn("user", ALLERGY)
    chat.add_turn("assistant", "Noted.")
    result = chat.ask("Which snack should I avoid bringing?")
    # no page to recall: answered from the chat's prompt, or from the standing fact (which is no recall)
    assert result.trace.decision in ("answer", "fact") and result.trace.candidates == []
    assert lp.store.embedding_rows("turn") == []


def test_ask_json_lists_candidates_with_scores(tmp_path, backend):
    lp = LocalPager(tmp_path / "s.db", backend=backend)
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_10", budget=200))
    for t in conversation_turns():
        chat.add_turn(t.role, t.text)
    # a question about what was said: the allergy is an assistant's turn here (odd index), so no standing fact of
    # the user's meets "Which snack should I avoid?" and the pair bank answers that "not remembered" unrecalled
    result = chat.ask("What was that about peanuts and the ER?").to_dict()
    # the recall ran; the greedy answer (which reads the turns' day, and so differs from day to day) is either
    # given, or withheld because it states a value the recalled turns do not hold
    assert result["decision"] == "recall" or (result["decision"] == "unknown"
                                             and result["grounding"] and not result["grounding"]["grounded"])
    assert result["candidates"] and all("score" in c and "reason" in c for c in result["candidates"])
    assert 3 in result["injected_page_ids"]
