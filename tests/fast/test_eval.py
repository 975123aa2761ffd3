"""Scoring and summaries of the evaluation, on hand-made answers and results (no model)."""

from __future__ import annotations

import pytest

from localpager.core.records import Probe, Transcript, Turn
from localpager.lab.synthetic import generate_conversation
from localpager.lab.evaluate import EvalConfig, EvalReport, ProbeResult, _ask_points, summarize
from localpager.lab.metrics import (
    contains_answer,
    locomo_score,
    normalize,
    partial_f1,
    says_not_mentioned,
    score_answer,
    token_f1,
)
from localpager.runtime.prompts import NOT_IN_WHAT_I_FOUND, NOT_REMEMBERED


# -- metrics -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,expected", [
    ("The Budget is $2,400!", "budget is 2400"),
    ("An apple and a pear", "apple pear"),
    ("  spaced\tout \n words ", "spaced out words"),
    (1188, "1188"),
])
def test_normalize_lowercases_and_drops_punctuation_articles_and_thousands_commas(text, expected):
    assert normalize(text) == expected


@pytest.mark.parametrize("output,answers,expected", [
    ("Your budget is $2,400 now.", ["2400"], True),
    ("Avoid PEANUTS!", ["peanuts"], True),
    ("Room 1188 is yours", ["188"], False),  # whole words only
    ("It's in Lisbon", ["Porto", "Lisbon"], True),  # any accepted answer
    ("Nothing here", [], False),
    ("The end", ["the"], False),  # an answer that normalises to nothing matches nothing
    ("Meet at 8.15 am", ["8.15 am"], True),
])
def test_containment(output, answers, expected):
    assert contains_answer(output, answers) is expected


def test_token_f1_stems_and_counts_overlap():
    assert token_f1("7 May 2023", "7 May 2023") == 1.0
    assert token_f1("She painted", "painting") == pytest.approx(2 * 0.5 * 1.0 / 1.5)  # painted ~ painting
    assert token_f1("blue car", "red bike") == 0.0
    assert token_f1("", "anything") == 0.0 and token_f1("anything", "") == 0.0
    assert token_f1("the the the", "the") == 0.0  # articles are not tokens


def test_partial_f1_scores_each_part_of_the_answer_by_its_best_match():
    assert partial_f1("painting, running", "painting, pottery") == pytest.approx(0.5)
    # one predicted part "pottery painting" ("and" is dropped like an article) against each answer part: F1 2/3
    assert partial_f1("pottery and painting", "painting, pottery") == pytest.approx(2 / 3)
    assert partial_f1(", ,", "x") == 0.0


@pytest.mark.parametrize("output,expected", [("It was not mentioned.", True), ("I don't know", True),
                                             ("No information available about that.", True), ("Paris.", False),
                                             (NOT_REMEMBERED, True), (NOT_IN_WHAT_I_FOUND, True)])
def test_not_mentioned_phrases(output, expected):
    assert says_not_mentioned(output) is expected


def test_locomo_scores_by_category():
    assert locomo_score("It was not mentioned in the conversation.", "", 5) == 1.0
    assert locomo_score("She went to Paris.", "", 5) == 0.0
    assert locomo_score("psychology", "Psychology; counseling", 3) == 1.0  # before the ';' only
    assert locomo_score("counseling", "Psychology; counseling", 3) == 0.0
    assert locomo_score("painting, running", "painting, pottery", 1) == pytest.approx(0.5)  # multi-hop
    assert 0 < locomo_score("On 7 May", "7 May 2023", 2) < 1


def test_score_answer_uses_locomo_only_for_locomo_probes():
    assert score_answer("psychology and more", ["Psychology; counseling"], {"category": "3"}) == pytest.approx(2 / 3)
    assert score_answer("Psychology; counseling", ["psychology"]) == 1.0  # containment
    assert score_answer("It is 2400.", ["2400"], {}) == 1.0 and score_answer("It is 240.", ["2400"]) == 0.0
    assert score_answer("not mentioned", [], {"category": 5}) == 1.0


# -- summaries ---------------------------------------------------------------------------------------------
def result(score=1.0, needs=True, evidence=(3,), injected=(3,), recalled=True, latency=100.0, named=(),
           type="allergy", oracle=None) -> ProbeResult:
    return ProbeResult(conversation="c", question="q", type=type, answers=["x"], output="out", score=score,
                       needs_recall=needs, evidence_pages=list(evidence), injected_pages=list(injected),
                       recalled=recalled, latency_ms=latency, named_pages=list(named), oracle_score=oracle)


def test_an_empty_run_has_no_rates():
    s = summarize([])
    assert s["probes"] == 0 and s["needs_recall"] == 0
    for key in ("recall_triggered", "page_selection_accuracy", "recall_precision", "model_selection_accuracy",
                "evidence_resident", "false_recall_rate", "e2e_accuracy", "oracle_e2e_accuracy"):
        assert s[key] is None, key
    assert s["latency_ms"] == {"p50": None, "p95": None}


def test_every_rate_on_a_hand_made_run():
    results = [
        result(score=1.0, injected=(3, 5), named=(3,), oracle=1.0),  # found, model named the right page
        result(score=0.0, injected=(5,), named=(5,), oracle=1.0),  # wrong page, model named the wrong one
        result(score=0.5, recalled=False, injected=(), oracle=0.0),  # needed a recall, none happened
        result(score=1.0, needs=False, evidence=(9,), recalled=True, injected=(2,)),  # a false recall
        result(score=0.0, needs=False, evidence=(9,), recalled=False, injected=()),
    ]
    s = summarize(results)
    assert (s["probes"], s["needs_recall"]) == (5, 3)
    assert s["recall_triggered"] == pytest.approx(2 / 3, abs=1e-4)
    assert s["page_selection_accuracy"] == pytest.approx(1 / 3, abs=1e-4)
    assert s["recall_precision"] == pytest.approx(1 / 4)  # injected 3, 5, 5, 2: one evidence page
    assert s["model_selection_accuracy"] == 0.5  # of the two probes where the model named pages
    assert s["evidence_resident"] == 0.4
    assert s["false_recall_rate"] == 0.5
    assert s["e2e_accuracy"] == 0.5
    assert s["oracle_e2e_accuracy"] == pytest.approx(2 / 3, abs=1e-4)  # only probes with an oracle run


def test_general_questions_answered_not_remembered_are_counted_apart():
    from dataclasses import replace

    from localpager.core.records import GENERAL_PROBE

    asked = result(type=GENERAL_PROBE, injected=())
    general = [replace(asked, abstained=refused) for refused in (True, False, False, False)]
    s = summarize([*general, replace(result(), abstained=True)])
    assert s["general_abstention"] == 0.25  # memory refusing a question that needs none
    assert s["false_abstention_rate"] == 1.0  # the fact probe's, apart
    assert summarize([result()])["general_abstention"] is None


def test_what_answered_not_remembered_is_told_apart():
    from dataclasses import replace

    from localpager.lab.evaluate import abstention_cause
    from localpager.runtime.trace import Trace

    def trace(**parts) -> Trace:
        found = Trace(turn=0, question="Which bank am I with?")
        for name, value in parts.items():
            setattr(found, name, value)
        return found

    assert abstention_cause(trace(answerable={"answer": False, "features": {"never_told": 1.0}})) == "never told"
    assert abstention_cause(trace(answerable={"answer": False, "features": {"dense": 0.2}})) == "floor"
    assert abstention_cause(trace(answerable={"answer": True, "features": {}},
                                  grounding={"grounded": False, "unsupported": ["Monzo"]})) == "grounding"
    assert abstention_cause(trace()) == "model"
    said = [replace(result(), abstained=True, abstained_by=cause) for cause in ("floor", "floor", "grounding")]
    by = summarize([*said, result()])["false_abstention_by"]
    assert by == {"never told": 0.0, "floor": 0.5, "grounding": 0.25, "model": 0.0}


def test_latency_percentiles():
    s = summarize([result(latency=float(ms)) for ms in range(1, 21)])
    assert s["latency_ms"] == {"p50": 10.5, "p95": 20.0}
    assert summarize([result(latency=7.0)])["latency_ms"] == {"p50": 7.0, "p95": 7.0}


def test_the_report_summarises_by_type_and_keeps_every_result():
    results = [result(type="allergy"), result(type="allergy", score=0.0), result(type=None, needs=False)]
    data = EvalReport(EvalConfig(), results, seconds=12.34).to_dict()
    assert data["probes"] == 3 and data["seconds"] == 12.3
    assert sorted(data["by_type"]) == ["allergy", "untyped"]
    assert data["by_type"]["allergy"]["e2e_accuracy"] == 0.5 and data["by_type"]["untyped"]["probes"] == 1
    assert [r["score"] for r in data["results"]] == [1.0, 0.0, 1.0]
    assert data["config"]["strategy"] == "bookmarks" and data["config"]["paging"]["budget"] == 512


def test_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="unknown strategy 'magic'"):
        EvalConfig(strategy="magic")


def test_probes_are_asked_at_their_turn_and_only_with_evidence():
    turns = [Turn("user" if i % 2 == 0 else "assistant", f"t{i}", i) for i in range(10)]
    probes = [Probe("a", ["x"], [1], at=3), Probe("b", ["x"], [], at=3), Probe("c", ["x"], [2]),
              Probe("d", ["x"], [4], at=5), Probe("e", ["x"], [0], at=3)]
    conv = Transcript("c", turns, probes)
    points = _ask_points(conv, None)
    assert {at: [p.question for p in ps] for at, ps in points.items()} == {3: ["a", "e"], 9: ["c"], 5: ["d"]}
    limited = _ask_points(conv, 2)  # the first two probes that have evidence
    assert {at: [p.question for p in ps] for at, ps in limited.items()} == {3: ["a"], 9: ["c"]}


# -- counting, containment, updated facts, LoCoMo scoring, settings -------------------------------------------
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


def test_hidden_bookmarks_leave_recall_to_the_similarity_trigger():
    from localpager.lab.evaluate import _selector, _settings
    from localpager.retrieval.rerank import RerankSelector

    config = EvalConfig(show_bookmarks=False)
    recall, rerank, _ = _settings(config)
    assert recall.mode == "auto" and recall.show_bookmarks is False and config.trigger == "gate"
    assert _selector(None, "c", config) is None and RerankSelector.trigger == "gate"  # the product's, the gate
    assert _settings(EvalConfig())[0].show_bookmarks is True
    assert _settings(EvalConfig(strategy="truncation"))[0].show_bookmarks is False
