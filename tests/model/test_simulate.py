"""The paging simulator on generated data and LoCoMo with the real tokenizer, and the rerank retriever with the
real embedder (the rest, on hand-made conversations: tests/fast/test_simulate.py)."""

from __future__ import annotations

import pytest
from helpers import LOCOMO, filler_pages, needs_locomo, page

from localpager.lab.retrievers import get_retriever
from localpager.lab.simulate import SimulationGrid, belady_violations
from localpager.lab.synthetic import generate_dataset

ONLINE = ("fifo", "lru", "lfu", "hybrid")


@pytest.mark.slow
@pytest.mark.model
def test_belady_beats_or_ties_online_policies_unless_reported(counter):
    convs = generate_dataset(6, seed=1, revisiting=True)
    boundaries = ["fixed_10", "topic_shift"]
    result = SimulationGrid(boundaries, [*ONLINE, "belady"], 1024, [], 3).run(convs, counter)
    hit = {(c.boundary, c.eviction): c.hit_rate for c in result.cells}
    beaten = {(b, e) for b in boundaries for e in ONLINE if hit[b, e] > hit[b, "belady"]}
    assert {(v.boundary, v.eviction) for v in belady_violations(result)} == beaten
    assert any(hit[b, "belady"] > max(hit[b, e] for e in ONLINE) for b in boundaries)


@pytest.mark.slow
@pytest.mark.model
@needs_locomo
def test_simulate_runs_on_locomo(counter):
    from localpager.store.loaders import load_conversations

    convs = load_conversations(LOCOMO).conversations[:2]
    result = SimulationGrid(["fixed_20"], ["lru", "belady"], 1024, ["bm25", "oracle"], 3).run(convs, counter)
    lru = next(c for c in result.cells if (c.eviction, c.retriever) == ("lru", "oracle"))
    assert lru.probes > 100 and lru.needs_recall > 0 and lru.selection_accuracy == 1.0


@pytest.mark.embedder
def test_rerank_finds_the_allergy_page_by_its_best_turn():
    pages = filler_pages()
    pages.insert(1, page(9, [
        "user: the bakery on the corner reopened",
        "assistant: their bread is lovely",
        "user: by the way, I'm badly allergic to peanuts and carry an EpiPen",
        "assistant: good to know, I'll keep that in mind",
    ], first=40))
    chosen = get_retriever("rerank").retrieve("Which snack should I avoid bringing?", pages, k=3)
    assert chosen[0] == 9 and len(chosen) == 3
