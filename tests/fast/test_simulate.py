"""The paging simulator and the retrievers, on conversations whose right answers are known (on the real
tokenizer and embedder: tests/model/test_simulate.py)."""

from __future__ import annotations

import json

import pytest
from helpers import filler_pages, page

from localpager.core.pager import PagingConfig
from localpager.core.records import Page, Probe, Transcript, Turn
from localpager.core.tokens import ApproxTokenCounter
from localpager.lab.retrievers import RETRIEVERS, get_retriever, retrieve_pages
from localpager.lab.simulate import (Belady, Cell, SimulationGrid, SimulationResult, belady_violations,
                                     simulate_conversation)


def make_turns(texts: list[str]) -> list[Turn]:
    return [Turn("user" if i % 2 == 0 else "assistant", t, i) for i, t in enumerate(texts)]


def allergy_conversation() -> Transcript:
    """20 turns of about 18 approximate tokens: fixed_5 makes 4 pages of about 90 tokens.

    Turn 0 (page 1) holds the fact; a budget of 200 tokens cannot keep all four pages.
    """
    texts = [f"filler message number {i} about the weather" for i in range(20)]
    texts[0] = "I am allergic to peanuts and carry an EpiPen"
    probes = [
        Probe("Which snack should I avoid?", ["peanuts"], evidence=[0]),
        Probe("What was message 18 about?", ["weather"], evidence=[18]),
    ]
    return Transcript("hand", make_turns(texts), probes)


# -- simulate_conversation ---------------------------------------------------------------------
def test_an_evicted_fact_needs_recall_and_the_newest_page_is_a_hit():
    config = PagingConfig(boundary="fixed_5", budget=200)
    outcomes = simulate_conversation(allergy_conversation(), config, ApproxTokenCounter(), ["oracle"], k=3)
    fact, recent = outcomes
    assert fact.evidence_pages == [1] and fact.needs_recall and fact.at == 19
    assert fact.evicted_pages >= 1 and fact.retrieved == {"oracle": [1]} and fact.found("oracle")
    assert recent.evidence_pages == [4] and recent.hit and recent.retrieved == {}


def test_belady_keeps_the_page_that_will_be_asked_about():
    config = PagingConfig(boundary="fixed_5", budget=200)
    conv = allergy_conversation()
    fifo = simulate_conversation(conv, config, ApproxTokenCounter(), eviction="fifo")
    belady = simulate_conversation(conv, config, ApproxTokenCounter(), eviction="belady")
    assert [o.hit for o in fifo] == [False, True]
    assert [o.hit for o in belady] == [True, True]


def test_probes_are_asked_at_their_turn_and_touch_their_pages():
    conv = allergy_conversation()
    conv.probes.insert(0, Probe("Which snack?", ["peanuts"], evidence=[0], at=7))  # page 1 still resident
    config = PagingConfig(boundary="fixed_5", budget=200)
    hits = {e: [(o.at, o.hit) for o in simulate_conversation(conv, config, ApproxTokenCounter(), eviction=e)]
            for e in ("fifo", "lfu")}
    assert hits["fifo"] == [(7, True), (19, False), (19, True)]
    assert hits["lfu"] == [(7, True), (19, True), (19, True)]  # the use at turn 7 kept page 1 in


def test_a_probe_asked_before_its_evidence_is_an_error():
    conv = allergy_conversation()
    conv.probes[0].evidence, conv.probes[0].at = [12], 5
    with pytest.raises(ValueError, match="asked after turn 5"):
        simulate_conversation(conv, PagingConfig(boundary="fixed_5"), ApproxTokenCounter())


def test_belady_evicts_never_used_pages_first_then_the_farthest_use():
    pages = [Page(1, 0, 4), Page(2, 5, 9), Page(3, 10, 14)]
    policy = Belady([(30, [7]), (20, [12]), (10, [0])])  # page 1's use lies before now: gone
    assert [p.page_id for p in policy.order(pages, now=15)] == [1, 2, 3]
    assert policy.next_use(pages[2], now=20) == 20  # a probe at `now` comes after the eviction


# -- simulate: the grid ------------------------------------------------------------------------
def test_grid_has_one_cell_per_boundary_eviction_retriever():
    convs = [allergy_conversation()]
    result = SimulationGrid(["fixed_5", "fixed_10"], ["fifo", "belady"], 200, ["oracle", "overlap"], 3).run(
        convs, ApproxTokenCounter())
    cells = {(c.boundary, c.eviction, c.retriever): c for c in result.cells}
    assert len(cells) == len(result.cells) == 2 * 2 * 2
    cell = cells["fixed_5", "fifo", "oracle"]
    assert (cell.probes, cell.needs_recall, cell.hit_rate, cell.avg_pages) == (2, 1, 0.5, 4.0)
    assert cell.selection_accuracy == 1.0
    data = json.loads(json.dumps(result.to_dict()))
    assert {"boundary", "eviction", "retriever", "hit_rate", "avg_pages"} <= data["cells"][0].keys()
    table = result.to_markdown()
    assert "| fixed_5 | belady |" in table and "oracle@3" in table


def test_grid_without_retrievers_still_reports_paging_and_shows_progress():
    runs = []
    result = SimulationGrid(["fixed_5"], ["fifo"], 200, [], 3).run(
        [allergy_conversation()], ApproxTokenCounter(), progress=lambda items: runs.extend(items) or runs)
    assert [(c.retriever, c.hit_rate, c.selection_accuracy) for c in result.cells] == [(None, 0.5, None)]
    assert [(b, e, conv.id) for b, e, conv in runs] == [("fixed_5", "fifo", "hand")]


def test_unknown_names_fail_before_anything_runs():
    for bad in (dict(boundaries=["fixed_x"]), dict(evictions=["mru"]), dict(retrievers=["psychic"])):
        args = dict(boundaries=["fixed_5"], evictions=["fifo"], retrievers=["oracle"]) | bad
        with pytest.raises(ValueError, match="unknown"):
            SimulationGrid(budget=200, k=3, **args).run([allergy_conversation()], ApproxTokenCounter())


def test_belady_violations_are_reported_with_a_reason():
    def cell(eviction: str, hit_rate: float) -> Cell:
        return Cell("fixed_5", eviction, "oracle", hit_rate, 4.0, 1, 1.0, 2, 1.0)

    result = SimulationResult(200, 3, 1, [cell("fifo", 0.6), cell("lru", 0.5), cell("belady", 0.5)])
    [violation] = belady_violations(result)
    assert (violation.eviction, violation.hit_rate, violation.belady_hit_rate) == ("fifo", 0.6, 0.5)
    assert "unequal" in violation.explanation and "watermark" in violation.explanation
    with pytest.raises(ValueError, match="belady"):
        belady_violations(SimulationResult(200, 3, 1, [cell("fifo", 0.6)]))


# -- retrievers ---------------------------------------------------------------------------------
def test_get_retriever_knows_every_retriever_and_rejects_others():
    assert {get_retriever(name).name for name in RETRIEVERS} == {"overlap", "bm25", "rerank", "dense", "oracle"}
    with pytest.raises(ValueError, match="unknown retriever 'psychic'.*overlap"):
        get_retriever("psychic")


@pytest.mark.parametrize("name", ["overlap", "bm25"])
def test_lexical_retrievers_rank_the_matching_page_first(name):
    pages = filler_pages()
    pages.insert(2, page(9, ["user: my budget for the Lisbon trip is 3000 euros", "assistant: noted"]))
    chosen = get_retriever(name).retrieve("What is my budget for the Lisbon trip?", pages, k=3)
    assert chosen[0] == 9
    assert get_retriever(name).retrieve("quantum chromodynamics", pages, k=3) == []  # no shared word


def test_bm25_handles_cjk():
    texts = ["user: 今天天气很好", "user: 我对花生过敏，不能吃", "user: 周末去看电影"]
    pages = [page(i + 1, [text]) for i, text in enumerate(texts)]
    assert get_retriever("bm25").retrieve("花生过敏怎么办", pages, k=2)[0] == 2


def test_oracle_picks_the_evidence_pages_and_needs_the_evidence():
    pages = filler_pages()
    oracle = get_retriever("oracle")
    assert retrieve_pages(oracle, "anything", pages, 3, evidence=[5, 2]) == [3, 2]
    assert retrieve_pages(oracle, "anything", pages, 1, evidence=[5, 2]) == [3]
    with pytest.raises(ValueError, match="evidence"):
        oracle.retrieve("anything", pages, 3)


