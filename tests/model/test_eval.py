"""A CI-sized end-to-end evaluation with the real model and embedder, and the search tool's constrained query
(scoring and summaries on hand-made results: tests/fast/test_eval.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localpager.core.pager import PagingConfig
from localpager.lab.evaluate import EvalConfig, evaluate
from localpager.lab.report import write_eval
from localpager.lab.synthetic import generate_conversation


@pytest.mark.model
@pytest.mark.embedder
def test_end_to_end_eval_on_a_ci_sized_subset(tmp_path):
    from dataclasses import replace

    from localpager.core.records import ABSENT_PROBE, Probe

    conv = generate_conversation(seed=21, n_turns=120)
    # a question about something never said: here the relevance floor answers it "not remembered"
    conv = replace(conv, probes=[*conv.probes, Probe("Which bank am I with?", [], [], ABSENT_PROBE)])
    config = EvalConfig(limit=3, paging=PagingConfig(budget=384))
    report = evaluate([conv], config)
    data = report.to_dict()
    keys = {"probes", "needs_recall", "recall_triggered", "page_selection_accuracy", "recall_precision",
            "false_recall_rate", "e2e_accuracy", "by_type", "latency_ms", "oracle_e2e_accuracy"}
    assert keys <= set(data)
    assert data["probes"] == 3 and data["needs_recall"] >= 1
    assert 0 <= data["e2e_accuracy"] <= 1 and 0 <= data["oracle_e2e_accuracy"] <= 1
    assert all(r["output"] for r in data["results"])
    # each "not remembered" says what said it, and the causes share out the fact probes' false abstentions
    from localpager.lab.evaluate import ABSTENTION_CAUSES

    assert any(r["abstained"] for r in data["results"])
    assert all((r["abstained_by"] in ABSTENTION_CAUSES) == r["abstained"] for r in data["results"])
    assert sum(data["false_abstention_by"].values()) == pytest.approx(data["false_abstention_rate"], abs=1e-3)
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


