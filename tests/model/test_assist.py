"""Model-assisted keywords, cooperative eviction and worth, with the real SmolLM2 GGUF: every strategy is run
on the real model (the logic on a scripted backend, and parsing and ordering on plain data: tests/fast/test_assist.py).
"""

from __future__ import annotations

import time

import pytest
from helpers import CHINESE, paged_turns

from localpager.core.choices import MODEL_STRATEGIES
from localpager.core.pager import PagingConfig, page_conversation
from localpager.core.text import term_key, tokenize_words
from localpager.core.tokens import ApproxTokenCounter
from localpager.lab.synthetic import generate_conversation
from localpager.memory.api import LocalPager
from localpager.runtime.assist import BATCH_PROMPT, WORTH_PROMPT, Assistant, maintain


# -- the real model ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def assistant(backend):
    return Assistant(backend.fork())


@pytest.fixture(scope="module")
def english_pages(counter):
    """Four pages of a generated conversation (each strategy's property is checked on every page; the contextual
    strategy makes one model call a page)."""
    conv = generate_conversation(seed=11, n_turns=60)
    pager = page_conversation(conv.turns[:40], counter, PagingConfig(boundary="fixed_10"))
    return [p.text for p in pager.pages]


def _grounded(keyword: str, text: str) -> bool:
    """Every word of the keyword occurs in the page (compared as the tokenizer splits them; a bookmark writes a
    time's colon as a dot, "5.15pm" for "5:15pm", as ':' separates a bookmark's page from its keywords)."""
    words = tokenize_words(text) + tokenize_words(text.replace(":", "."))
    page = set(words) | {term_key(w) for w in words}
    return all(w in page or term_key(w) in page for w in tokenize_words(keyword))


@pytest.mark.model
@pytest.mark.parametrize("strategy", MODEL_STRATEGIES)
@pytest.mark.parametrize("language", ["english", "chinese"])
def test_every_strategy_gives_every_page_one_to_five_keywords_from_its_text(assistant, english_pages, strategy,
                                                                              language):
    pages = english_pages if language == "english" else CHINESE
    out = assistant.keywords(pages, range(len(pages)), strategy, k=4)
    assert sorted(out) == list(range(len(pages)))
    assert sum(s.unparsed for s in assistant.stats.values()) == 0  # every call's output parsed
    for i, keywords in out.items():
        assert 1 <= len(keywords) <= 4, (i, keywords)
        assert len(set(keywords)) == len(keywords)
        assert all(_grounded(kw, pages[i]) for kw in keywords), (i, keywords)
        assert not any(c in kw for kw in keywords for c in ",[]:\n")  # safe inside [p3:kw1,kw2]
    if strategy == "llm-batch":  # chosen from terms no other page has: no overlap across pages
        keys = [term_key(kw) for kws in out.values() for kw in kws]
        assert len(keys) == len(set(keys))


@pytest.mark.model
def test_eviction_advice_and_worth_parse(assistant, monkeypatch):
    pages, turns = paged_turns(["My flight to Lisbon is on May 3rd", "Noted: May 3rd, Lisbon.",
                           "I am allergic to peanuts", "I will remember the peanut allergy."])
    named = assistant.advise_eviction([(p, turns[p.first_turn].text) for p in pages], "When do I fly to Lisbon?")
    assert set(named) <= {1, 2}
    assert assistant.worth("user: hi!\nassistant: hello!") is False
    assert assistant.stats["worth"].calls == 0  # decided by the rule
    outputs = []
    generate = assistant.backend.generate
    monkeypatch.setattr(assistant.backend, "generate", lambda *a, **kw: outputs.append(generate(*a, **kw)) or outputs[-1])
    verdict = assistant.worth(CHINESE[0])
    assert assistant.stats["worth"].calls == 1
    assert [g.text for g in outputs] == ["yes" if verdict else "no"]  # the grammar held: exactly yes or no


@pytest.mark.model
def test_cooperative_eviction_never_evicts_pinned_or_newest(tmp_path, backend):
    lp = LocalPager(tmp_path / "s.db", backend=backend)
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_10", eviction="cooperative",
                                                                 budget=300))
    turns = generate_conversation(seed=7, n_turns=120).turns
    for turn in turns[:12]:
        chat.add_turn(turn.role, turn.text)
    chat.pin(1)
    for turn in turns[12:]:
        chat.add_turn(turn.role, turn.text)
        assert not chat.pager.page(1).evicted
        assert not chat.pager.pages[-1].evicted
    assert chat.pager.evicted and lp.assistant.stats["evict"].calls >= 1
    assert lp.assistant.backend is not lp.backend  # a context of its own


@pytest.mark.model
@pytest.mark.embedder
def test_model_keywords_run_after_the_answer_and_keep_the_chat_cache(tmp_path, backend):
    lp = LocalPager(tmp_path / "s.db", backend=backend)
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_10", keywords="llm-batch",
                                                                 worth=True, budget=300))
    for turn in generate_conversation(seed=9, n_turns=60).turns[:50]:
        chat.add_turn(turn.role, turn.text)
    pending = chat.pager.pending_keywords()
    assert pending and all(p.keywords_by == "heuristic" and p.keywords for p in pending)  # usable at once
    start = time.perf_counter()
    result = chat.ask("What did I tell you about my plans?")
    wall_ms = (time.perf_counter() - start) * 1000
    assert chat.pager.pending_keywords() == [] and chat.pager.pending_worth() == []  # done after the answer
    side_ms = sum(s["ms"] for s in lp.assistant.stats_dict().values())
    assert lp.assistant.stats["keywords:llm-batch"].calls >= 1 and side_ms > 0
    assert result.trace.to_dict()["timings_ms"]["total"] <= wall_ms - side_ms  # the answer's timings exclude it
    in_chat_cache = backend.detokenize(backend._llm._input_ids)  # what the chat's own context holds
    assert BATCH_PROMPT not in in_chat_cache and WORTH_PROMPT not in in_chat_cache  # the assistant ran elsewhere
    reopened = LocalPager(tmp_path / "s.db", backend=backend).conversation("c")
    closed = reopened.pager.closed()
    assert all(p.keywords_by == "llm-batch" and 1 <= len(p.keywords) <= 4 for p in closed)
    assert all(p.worth is not None for p in closed)


@pytest.mark.model
def test_ingest_with_a_model_strategy_chooses_keywords_in_a_batch(tmp_path, backend):
    conv = generate_conversation(seed=13, n_turns=60)
    pager = page_conversation(conv.turns, ApproxTokenCounter(), PagingConfig(boundary="fixed_10", keywords="hybrid"))
    assistant = Assistant(backend.fork())
    changed = maintain(pager, assistant)
    assert {p.page_id for p in changed} == {p.page_id for p in pager.closed()}
    assert assistant.stats["keywords:hybrid"].calls == 1  # one call for the whole conversation


class _BrokenSide:
    """The real backend for the chat; its fork (the assistant's context) fails on every generation."""

    def __init__(self, backend):
        self.inner = backend

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def fork(self):
        from localpager.backends.base import BackendError

        broken = _BrokenSide(self.inner)

        def generate(*args, **kwargs):
            raise BackendError("side context failed")

        broken.generate = generate
        return broken


@pytest.mark.model
def test_a_failing_side_context_loses_no_turn_and_no_answer(tmp_path, backend):
    from localpager.runtime.settings import RecallSettings

    lp = LocalPager(tmp_path / "s.db", backend=_BrokenSide(backend), recall=RecallSettings(mode="never"))
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_10", keywords="llm-batch",
                                                                 eviction="cooperative", budget=300))
    turns = generate_conversation(seed=5, n_turns=60).turns[:40]
    for turn in turns:
        chat.add_turn(turn.role, turn.text)  # eviction advice fails: FIFO decides
    assert chat.pager.evicted
    result = chat.ask("Where am I travelling next?")  # keyword work after the answer fails
    assert result.answer
    reopened = LocalPager(tmp_path / "s.db", backend=backend).conversation("c")
    assert len(reopened.turns) == len(turns) + 2  # every turn and the answer are stored
    assert reopened.pager.pending_keywords()  # still waiting: retried after the next answer
