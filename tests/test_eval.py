"""Evaluation metrics on hand-made cases, and a CI-sized end-to-end run with the real model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localpager.core.pager import PagingConfig
from localpager.lab.evaluate import EvalConfig, ProbeResult, evaluate, summarize
from localpager.lab.metrics import contains_answer, locomo_score, partial_f1, score_answer, token_f1
from localpager.lab.report import write_eval
from localpager.lab.synthetic import generate_conversation


def result(score=1.0, needs=True, evidence=(3,), injected=(3,), recalled=True, latency=100.0):
    return ProbeResult("c", "q", "allergy", ["x"], "out", score, needs, list(evidence), list(injected), recalled,
                       latency)


def test_an_injected_evidence_page_counts_once():
    s = summarize([result(injected=(3, 3)), result(injected=(4,)), result(needs=False, injected=(), recalled=False)])
    assert s["probes"] == 3 and s["needs_recall"] == 2
    assert s["page_selection_accuracy"] == 0.5
    assert s["recall_precision"] == pytest.approx(1 / 3, abs=1e-3)  # pages 3, 3, 4: one distinct hit of three
    assert s["false_recall_rate"] == 0.0 and s["recall_triggered"] == 1.0


def test_false_recalls_and_latency_percentiles():
    s = summarize([result(needs=False, recalled=True, latency=10), result(needs=False, recalled=False, latency=30),
                   result(latency=20)])
    assert s["false_recall_rate"] == 0.5
    assert s["latency_ms"] == {"p50": 20, "p95": 30}


def test_containment_is_whole_words_after_normalising():
    assert contains_answer("Your budget is $2,400 now.", ["2400"])
    assert contains_answer("Avoid PEANUTS!", ["peanuts"])
    assert not contains_answer("Room 1188 is yours", ["188"])


def test_updated_facts_accept_only_the_new_value():
    conv = generate_conversation(seed=4, n_turns=160)
    updated = [p for p in conv.probes if p.extra.get("old_answers")]
    assert updated
    for p in updated:
        old = p.extra["old_answers"][0]
        assert score_answer(f"It is {old}.", p.answers) == 0.0
        assert score_answer(f"It is {p.answers[0]}.", p.answers) == 1.0


def test_locomo_scoring_follows_the_benchmark():
    assert locomo_score("It was not mentioned in the conversation.", "", 5) == 1.0
    assert locomo_score("She went to Paris.", "", 5) == 0.0
    assert token_f1("7 May 2023", "7 May 2023") == 1.0
    assert 0 < locomo_score("On 7 May", "7 May 2023", 2) < 1
    assert partial_f1("painting, running", "painting, pottery") == pytest.approx(0.5)
    assert locomo_score("psychology", "Psychology; counseling", 3) == 1.0


@pytest.mark.model
@pytest.mark.embedder
def test_end_to_end_eval_on_a_ci_sized_subset(tmp_path):
    conv = generate_conversation(seed=21, n_turns=120)
    config = EvalConfig(limit=3, paging=PagingConfig(budget=384))
    report = evaluate([conv], config)
    data = report.to_dict()
    keys = {"probes", "needs_recall", "recall_triggered", "page_selection_accuracy", "recall_precision",
            "false_recall_rate", "e2e_accuracy", "by_type", "latency_ms", "oracle_e2e_accuracy"}
    assert keys <= set(data)
    assert data["probes"] == 3 and data["needs_recall"] >= 1
    assert 0 <= data["e2e_accuracy"] <= 1 and 0 <= data["oracle_e2e_accuracy"] <= 1
    assert all(r["output"] for r in data["results"])
    truncation = evaluate([conv], EvalConfig(strategy="truncation", limit=3, oracle=False,
                                            paging=PagingConfig(budget=384))).to_dict()
    assert truncation["recall_triggered"] == 0.0 and all(not r["injected_pages"] for r in truncation["results"])
    written = write_eval(tmp_path / "out.json", {"bookmarks": data, "truncation": truncation})
    assert [p.suffix for p in written] == [".json", ".md", ".png"]
    assert json.loads(Path(written[0]).read_text())["bookmarks"]["probes"] == 3


@pytest.mark.model
def test_search_tool_query_is_grammar_constrained(backend):
    import re

    from localpager.backends.base import Message
    from localpager.lab.evaluate import SEARCH_PROMPT, SEARCH_QUERY

    prompt = backend.render([Message("system", SEARCH_PROMPT), Message("user", "Who should fix the dripping tap?")])
    text = backend.generate(prompt, max_tokens=40, constraint=SEARCH_QUERY).text
    assert re.fullmatch(r'search\("[a-zA-Z0-9 ,\'-]{2,60}"\)', text), text


def test_hidden_bookmarks_leave_recall_to_the_similarity_trigger():
    from localpager.lab.evaluate import _settings

    recall, rerank, _ = _settings(EvalConfig(show_bookmarks=False))
    assert recall.mode == "auto" and recall.show_bookmarks is False and rerank.trigger == "gate"
    assert _settings(EvalConfig())[0].show_bookmarks is True
    assert _settings(EvalConfig(strategy="truncation"))[0].show_bookmarks is False
