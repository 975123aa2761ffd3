"""The trace's token accounting and timings: one definition per pass, and a total the library reports too."""

from __future__ import annotations

import pytest
from helpers import DOG, STATEMENT, open_chat

from localpager.runtime.trace import STAGES, Pass, Trace


def _passes_hold(tokens: dict) -> None:
    """Each pass reads its prompt from the cache or evaluates it, never more; the top level sums the passes."""
    for kind in Pass:
        p = tokens[kind]
        assert p["evaluated"] + p["reused"] == p["prompt"] and p["reused"] <= p["prompt"], (kind, p)
    for key in ("evaluated", "reused", "generated"):
        assert tokens[key] == sum(tokens[kind][key] for kind in Pass), key


def test_a_decision_then_an_answer_on_the_chat_context_counts_each_pass_against_its_own_prompt(fake_pager):
    lp, chat = open_chat(fake_pager, ["Sunny days are lovely. The weather is fine."])
    t = chat.ask(STATEMENT).trace
    decision, answer = lp.backend.calls
    assert t.tokens["decision"]["prompt"] == len(decision.prompt)
    assert t.tokens["answer"]["prompt"] == len(answer.prompt) == len(decision.prompt) + len(decision.generation.tokens)
    # the answer re-reads the decision's prompt from the cache: summed over both passes, reused exceeds the chat's
    # prompt, which is why reused is compared with prompt within a pass
    assert t.tokens["answer"]["reused"] >= len(decision.prompt)
    assert t.tokens["prompt"] == len(decision.prompt)  # the chat's prompt
    _passes_hold(t.tokens)
    assert t.to_dict()["tokens"]["answer"] == t.tokens["answer"]


def test_a_focused_recall_has_no_decision_pass_and_an_answer_pass_on_its_own_prompt(fake_pager):
    from localpager.runtime.settings import RecallSettings

    # without the long-term layer: the dog's name is a standing fact, and a fact answer is written with no model
    lp, chat = open_chat(fake_pager, ["Biscuit."], recall=RecallSettings(facts=False))
    t = chat.ask(DOG).trace
    (answer,) = lp.backend.calls
    assert answer.backend != "main" and t.trigger == "gate"
    assert t.tokens["decision"] == {"prompt": 0, "evaluated": 0, "reused": 0, "generated": 0}
    assert t.tokens["answer"]["prompt"] == len(answer.prompt) == t.tokens["answer_prompt"]
    assert t.tokens["prompt"] > t.tokens["answer"]["prompt"]  # the chat's prompt, not read by this answer
    _passes_hold(t.tokens)


def test_timings_have_a_total_in_the_library_and_in_the_json(fake_pager):
    lp, chat = open_chat(fake_pager, ["Biscuit."])
    t = chat.ask(DOG).trace
    stages = sum(t.timings_ms[s] for s in STAGES)
    assert t.timings_ms["total"] == t.timings_ms.get("total") == t.total_ms == pytest.approx(stages) and stages > 0
    assert t.to_dict()["timings_ms"]["total"] == round(stages, 2)
    assert chat.traces()[-1]["timings_ms"]["total"] == round(stages, 2)
    with pytest.raises(KeyError):
        t.timings_ms["total"] = 1.0


def test_a_pass_never_reuses_more_than_its_prompt_even_when_a_backend_reports_no_prompt():
    t = Trace(0, "q")
    t.add_tokens(evaluated=3, reused=7, generated=2, prompt=0, kind="answer")
    assert t.tokens["answer"] == {"prompt": 10, "evaluated": 3, "reused": 7, "generated": 2}
    with pytest.raises(ValueError, match="unknown pass"):
        t.add_tokens(1, 0, 0, 1, kind="rerank")
