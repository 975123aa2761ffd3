"""The lab's variants of the reranking selector (``lab.selectors``: ``eval --page-choice``, ``--signal``,
``--trigger``), on the fakes: a hashing embedder and a real store. The product's selector: tests/fast/test_runtime.py,
tests/model/test_rerank.py."""

from __future__ import annotations

import inspect

import pytest

from localpager.core.pager import PagingConfig
from localpager.lab.selectors import (
    LabSelector,
    QuestionRule,
    is_product,
    lab_selector,
    selector_class,
    should_recall,
    trigger_features,
)
from localpager.retrieval.choices import PageChoice, Signal
from localpager.retrieval.ranking import TurnHit
from localpager.retrieval.rerank import RerankSelector
from localpager.runtime.choices import Trigger

MARKER = "Zorblaxquintessa"
QUESTION = f"What is my locker code word {MARKER}?"


@pytest.fixture
def chat(fake_pager):
    lp = fake_pager()
    conv = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", budget=60))
    for i in range(30):
        text = f"Turn {i} is about topic{i // 5} with zebra{i} and number {i}."
        if i == 7:
            text += f" My locker code word is {MARKER}."
        conv.add_turn("user" if i % 2 == 0 else "assistant", text)
    assert len(conv.pager.evicted) >= 3, "the precondition of these tests"
    return lp, conv


def selector(chat, **choices):
    lp, conv = chat
    return lab_selector(lp.index, conv.id, lp.rerank, lp.lexical(conv.id), **choices)


# -- the question-form trigger's rule ----------------------------------------------------------------------
def test_trigger_features_and_the_rule():
    hits = [TurnHit(5, 3, 0.6, 0.5, 0.7), TurnHit(4, 3, 0.4, 0.6, 0.1), TurnHit(0, 1, 0.35, 0.2, 0.3)]
    f = trigger_features("Where did I park?", hits)
    assert (f.score, f.margin, f.dense, f.lexical, f.question, f.pages) == (0.6, pytest.approx(0.25), 0.6, 0.7, True, 2)
    rule = QuestionRule(question_threshold=0.5, statement_threshold=None)
    assert should_recall(f, rule)
    assert not should_recall(trigger_features("I parked downstairs.", hits), rule)  # not a question
    assert should_recall(trigger_features("I parked downstairs.", hits), QuestionRule(statement_threshold=0.6))
    assert not should_recall(f, QuestionRule(question_threshold=0.7))
    assert not should_recall(f, QuestionRule(question_threshold=0.5, min_margin=0.3))
    none = trigger_features("Where did I park?", [])
    assert none.pages == 0 and not should_recall(none, QuestionRule(question_threshold=0.0))


# -- the selectors ------------------------------------------------------------------------------------------
def test_the_defaults_are_the_product_selector_unchanged():
    cls = selector_class(PageChoice.MODEL_RERANK, Signal.TURN, Trigger.GATE)
    assert cls is LabSelector and issubclass(cls, RerankSelector)
    assert not [name for name, value in vars(LabSelector).items() if inspect.isfunction(value)]  # overrides nothing
    assert is_product("model+rerank", "turn", "gate") and not is_product("model", "turn", "gate")
    for p in PageChoice:
        for s in Signal:
            for t in Trigger:
                made = lab_selector(None, "c", page_choice=p, signal=s, trigger=t)
                assert (made.page_choice, made.signal, made.trigger) == (p, s, t)
    with pytest.raises(ValueError, match="unknown trigger 'x'"):
        lab_selector(None, "c", trigger="x")


def test_the_model_pages_alone_in_the_models_order_and_never_unasked(chat):
    lp, conv = chat
    pager = conv.pager
    evicted = [p.page_id for p in pager.evicted]
    model = selector(chat, page_choice="model", trigger="question")
    assert not model.should_recall(QUESTION, pager) and model.last_gate is None  # whatever the trigger
    named = [evicted[2], evicted[0]]
    injections, candidates = model.select(QUESTION, named, pager, room=10_000)
    assert [(c.page_id, c.score, c.named_by_model) for c in candidates] == [(named[0], 1.0, True), (named[1], 0.5, True)]
    assert [i.page.page_id for i in injections] == [named[0]]  # at most max_pages (1), however it scores
    assert model.select(QUESTION, [], pager, room=10_000) == ([], [])


def test_the_ranking_alone_takes_no_page_the_model_names(chat):
    lp, conv = chat
    pager = conv.pager
    product = lp.selector(conv.id)
    _, best = product.select(QUESTION, [], pager, room=10_000)
    ranked = selector(chat, page_choice="rerank")
    worst = next(p.page_id for p in pager.evicted if p.page_id not in {c.page_id for c in best})
    injections, candidates = ranked.select(QUESTION, [worst], pager, room=10_000)
    assert [(c.page_id, c.score) for c in candidates] == [(c.page_id, c.score) for c in best]  # no bonus, no page
    assert worst not in {c.page_id for c in candidates}
    with_named = product.select(QUESTION, [worst], pager, room=10_000)[1]
    assert worst in {c.page_id for c in with_named if c.named_by_model}  # the product takes it, with the bonus


def test_the_question_trigger_pages_in_questions_and_off_pages_in_nothing(chat):
    lp, conv = chat
    pager = conv.pager
    question = selector(chat, trigger="question")
    assert question.trigger == Trigger.QUESTION
    assert question.should_recall(QUESTION, pager) and question.last_gate is None
    assert not question.should_recall("I painted the fence today.", pager)
    off = selector(chat, trigger="off")
    assert not off.should_recall(QUESTION, pager) and off.last_gate is None
    product = lp.selector(conv.id)
    product.should_recall(QUESTION, pager)
    assert product.last_gate is not None  # the gate was asked


@pytest.mark.parametrize("signal", ["bookmark", "text"])
def test_a_stored_signal_ranks_the_evicted_pages_by_their_own_vectors(chat, signal):
    lp, conv = chat
    pager = conv.pager
    stored = selector(chat, signal=signal)
    hits = stored._page_hits(QUESTION, pager)
    expected = lp.index.rank(conv.id, QUESTION, [p.page_id for p in pager.evicted], signal)
    assert list(hits) == [h.page_id for h in expected]
    assert set(hits) <= {p.page_id for p in pager.evicted}
    injections, candidates = stored.select(QUESTION, [], pager, room=10_000)
    assert injections and injections[0].page.page_id == candidates[0].page_id == next(iter(hits))
    assert all(not i.labels for i in injections)  # no later turn goes first: there is no chosen turn
