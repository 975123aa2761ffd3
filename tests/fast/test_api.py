"""The library API's own logic (durability, paging through add_turn, ingest, pin, budgets, side work) on a
scripted backend and a hashing embedder: no model file, milliseconds per test."""

from __future__ import annotations

import json
import re

import pytest
from fakes import ScriptedBackend, shortest_sentence

from localpager.backends.base import BackendError
from localpager.core.pager import PagingConfig
from localpager.lab.synthetic import generate_dataset
from localpager.runtime.assist import WORTH
from localpager.store.loaders import dump_jsonl

TOPICS = ["the garden fence", "my sister Hartley", "the Lisbon flight", "a peanut allergy", "the kitchen budget",
          "the Tuesday dentist", "the router password", "the piano lessons", "the rent increase", "the car service"]


def talk(n: int, start: int = 0) -> list[tuple[str, str]]:
    """``n`` turns, each naming its topic and number (no small talk)."""
    return [("user" if i % 2 == 0 else "assistant", f"Turn {i} is about {TOPICS[(i // 5) % len(TOPICS)]} number {i}.")
            for i in range(start, start + n)]


def fill(chat, n: int, start: int = 0) -> None:
    for role, text in talk(n, start):
        chat.add_turn(role, text)


def page_rows(pages):
    return [(p.page_id, p.first_turn, p.last_turn, p.token_count, p.keywords, p.evicted, p.pinned, p.keywords_by,
             p.worth) for p in pages]


# -- add_turn ------------------------------------------------------------------------------------------
def test_a_turn_is_durable_when_add_turn_returns(fake_pager):
    lp = fake_pager()
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", budget=10_000))
    chat.add_turn("user", "I'm allergic to peanuts.", time="2024-05-01 10:00", speaker="Ana")
    fill(chat, 6, start=1)
    other = fake_pager().conversation("c")  # a second LocalPager on the same file, as another process
    assert [(t.index, t.role, t.text, t.time, t.speaker) for t in other.turns] == \
        [(t.index, t.role, t.text, t.time, t.speaker) for t in chat.turns]
    assert other.turns[0].speaker == "Ana" and other.turns[0].time == "2024-05-01 10:00"
    assert page_rows(other.pages) == page_rows(chat.pages)
    assert [p.text for p in other.pages] == [p.text for p in chat.pages]
    assert lp.backend.calls == []  # paging needed no generation


@pytest.mark.parametrize("role,text,message", [("system", "hi", "role"), ("bot", "hi", "role"), ("user", "  \n", "text")])
def test_a_bad_turn_is_refused_and_nothing_is_stored(fake_pager, role, text, message):
    lp = fake_pager()
    chat = lp.conversation("c", create=True)
    chat.add_turn("user", "hello there")
    with pytest.raises(ValueError, match=message):
        chat.add_turn(role, text)
    assert len(lp.store.turns("c")) == len(chat.turns) == 1


def test_pages_count_the_backends_tokens(fake_pager):
    lp = fake_pager()
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", budget=10_000))
    fill(chat, 12)
    for page in chat.pages:
        expected = sum(lp.backend.count_tokens(chat.turns[i].render()) + chat.config.turn_overhead
                       for i in page.turn_range)
        assert page.token_count == expected
    assert lp.store.settings("c")["tokenizer"] == "scripted.gguf"


def test_reopening_with_another_model_recounts_the_pages(fake_pager):
    lp = fake_pager(backend=ScriptedBackend(model_name="a.gguf"))
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", budget=10_000))
    fill(chat, 12)
    before = [(p.token_count, len(p.turn_range)) for p in chat.pages]

    class Doubled(ScriptedBackend):  # another model: twice the tokens for the same text
        def count_tokens(self, text):
            return 2 * super().count_tokens(text)

    reopened = fake_pager(backend=Doubled(model_name="b.gguf")).conversation("c")
    assert [p.token_count for p in reopened.pages] == [n for n, _ in before]  # reading recounts nothing...
    assert lp.store.settings("c")["tokenizer"] == "a.gguf"
    reopened.set_budget(10_000)  # ...the first change that needs token counts does
    overhead = reopened.config.turn_overhead
    assert [p.token_count for p in reopened.pages] == [2 * (n - k * overhead) + k * overhead for n, k in before]
    assert lp.store.settings("c")["tokenizer"] == "b.gguf"
    assert [p.token_count for p in lp.store.pages("c")] == [p.token_count for p in reopened.pages]  # stored


# -- paging through add_turn ------------------------------------------------------------------------------
def test_add_turn_pages_out_in_batches_within_the_budget_and_stores_every_change(fake_pager):
    lp = fake_pager()
    config = PagingConfig(boundary="fixed_5", budget=400)  # a page is ~85 tokens: a batch frees 100+
    chat = lp.conversation("c", create=True, config=config)
    batches = []
    for role, text in talk(80):
        evicted_before = {p.page_id for p in chat.pager.evicted}
        chat.add_turn(role, text)
        pager = chat.pager
        newly = {p.page_id for p in pager.evicted} - evicted_before
        if newly:
            batches.append(sorted(newly))
            assert pager.memory_tokens() <= config.low_watermark * config.budget or not pager.evictable()
        assert pager.memory_tokens() <= config.budget or not pager.evictable()
        assert not pager.pages[-1].evicted  # the newest page stays
        assert page_rows(lp.store.pages("c")) == page_rows(pager.pages)  # durable with the turn
    assert batches and max(len(b) for b in batches) >= 2  # evicted in batches, not one page per turn
    assert [pid for b in batches for pid in b] == list(range(1, len(chat.pager.evicted) + 1))  # fifo
    assert all(p.keywords for p in chat.pager.evicted)  # every evicted page has a bookmark
    shown = [b for p, b in zip(chat.pages, chat.bookmarks()) if p.evicted]
    assert all(re.fullmatch(r"\[p\d+:[^\[\]:]+\]", b) for b in shown), shown
    assert lp.backend.calls == []


def test_a_lower_budget_evicts_at_once_and_is_stored(fake_pager):
    lp = fake_pager()
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", budget=10_000))
    fill(chat, 40)
    assert not chat.pager.evicted
    chat.set_budget(150)
    memory = chat.pager.memory_tokens()
    assert chat.pager.evicted and memory <= 150
    assert memory <= 150 * chat.config.low_watermark or not chat.pager.evictable()
    reopened = fake_pager().conversation("c")
    assert reopened.config.budget == 150
    assert [p.evicted for p in reopened.pages] == [p.evicted for p in chat.pages]


# -- pin ----------------------------------------------------------------------------------------------------
def test_a_pinned_page_is_never_evicted_and_stays_pinned_across_reopen(fake_pager):
    lp = fake_pager()
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", budget=150))
    fill(chat, 5)
    assert chat.pin(1).pinned
    for role, text in talk(75, start=5):
        chat.add_turn(role, text)
        assert not chat.pager.page(1).evicted
    assert len(chat.pager.evicted) >= 5
    reopened = fake_pager().conversation("c")
    assert reopened.pages[0].pinned and not reopened.pages[0].evicted
    assert [p.evicted for p in reopened.pages] == [p.evicted for p in chat.pages]
    with pytest.raises(KeyError, match="p99"):
        chat.pin(99)


def test_an_unpinned_page_can_leave_again(fake_pager):
    lp = fake_pager()
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", budget=10_000))
    fill(chat, 30)
    chat.pin(1)
    chat.set_budget(100)
    assert not chat.pager.page(1).evicted and chat.pager.page(2).evicted
    assert not chat.pin(1, pinned=False).pinned
    chat.set_budget(60)
    assert chat.pager.page(1).evicted
    assert lp.store.pages("c")[0].evicted and not lp.store.pages("c")[0].pinned


def test_pinning_an_evicted_page_keeps_it_evicted(fake_pager):
    lp = fake_pager()
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", budget=150))
    fill(chat, 60)
    assert chat.pager.page(1).evicted
    page = chat.pin(1)
    assert page.pinned and page.evicted
    assert lp.store.pages("c")[0].pinned


# -- ingest -------------------------------------------------------------------------------------------------
@pytest.fixture
def generated(tmp_path):
    (conv,) = generate_dataset(1, seed=1)
    path = tmp_path / "convs.jsonl"
    dump_jsonl([conv], path)
    return conv, path


def test_ingest_stores_a_generated_conversation_paged(fake_pager, generated):
    conv, path = generated
    lp = fake_pager()
    report = lp.ingest(path, config=PagingConfig(budget=512))
    assert (report.conversations, report.turns, report.probes, report.ids) == \
        (1, len(conv.turns), len(conv.probes), [conv.id])
    assert [(t.role, t.text) for t in lp.store.turns(conv.id)] == [(t.role, t.text) for t in conv.turns]
    assert [(p.question, p.answers, p.evidence, p.at) for p in lp.store.probes(conv.id)] == \
        [(p.question, p.answers, p.evidence, p.at) for p in conv.probes]
    pages = lp.store.pages(conv.id)
    assert len(pages) == report.pages and sum(p.evicted for p in pages) == report.evicted > 0
    assert pages[0].first_turn == 0 and pages[-1].last_turn == len(conv.turns) - 1
    assert all(a.last_turn + 1 == b.first_turn for a, b in zip(pages, pages[1:]))  # contiguous, no gap
    assert not pages[-1].evicted and all(p.keywords for p in pages)
    settings = lp.store.settings(conv.id)
    assert settings["budget"] == 512 and settings["tokenizer"] == "scripted.gguf"
    assert lp.backend.calls == []  # heuristic keywords: the model is not asked
    chat = lp.conversation(conv.id)  # opens paged as stored
    assert page_rows(chat.pages) == page_rows(pages)


def test_ingesting_an_id_twice_needs_replace(fake_pager, generated):
    conv, path = generated
    lp = fake_pager()
    lp.ingest(path)
    with pytest.raises(ValueError, match="already in the store"):
        lp.ingest(path)
    report = lp.ingest(path, config=PagingConfig(budget=300), replace=True)
    assert report.conversations == 1 and len(lp.conversations()) == 1
    assert lp.store.settings(conv.id)["budget"] == 300
    assert len(lp.store.turns(conv.id)) == len(conv.turns)


def test_ingest_with_a_model_keyword_strategy_asks_the_side_context(fake_pager, generated):
    conv, path = generated
    backend = ScriptedBackend(lambda prompt, grammar: shortest_sentence(grammar))
    lp = fake_pager(backend=backend)
    lp.ingest(path, config=PagingConfig(boundary="fixed_20", keywords="llm-batch"))
    pages = lp.store.pages(conv.id)
    assert all(p.keywords_by == "llm-batch" and 1 <= len(p.keywords) <= 4 for p in pages[:-1])
    offered = {int(pid): words.split(", ") for c in backend.calls
               for pid, words in re.findall(r"^p(\d+): (.*)$", c.text, re.M)}
    assert all(set(p.keywords) <= set(offered[p.page_id]) for p in pages[:-1])  # the page's own candidates
    assert backend.calls and all(c.backend != "main" for c in backend.calls)  # never the chat's context
    assert all(c.grammar for c in backend.calls)


# -- model side work through the conversation --------------------------------------------------------------
def test_maintain_runs_the_waiting_work_on_the_side_context_and_stores_it(fake_pager):
    verdicts = iter(["yes", "no"] * 20)

    def script(prompt, grammar):
        return next(verdicts) if grammar == WORTH.gbnf() else shortest_sentence(grammar)

    backend = ScriptedBackend(script)
    lp = fake_pager(backend=backend)
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", keywords="llm-batch",
                                                                 worth=True, budget=10_000))
    fill(chat, 22)
    assert backend.calls == []  # adding turns asks nothing
    pending = chat.pager.pending_keywords()
    assert [p.page_id for p in pending] == [1, 2, 3, 4] and all(p.keywords_by == "heuristic" for p in pending)
    changed = chat.maintain()
    assert sorted(p.page_id for p in changed) == [1, 2, 3, 4]
    assert chat.pager.pending_keywords() == [] and chat.pager.pending_worth() == []
    assert [p.worth for p in chat.pages[:4]] == [True, False, True, False]
    assert {c.backend for c in backend.calls} == {"fork1"}
    assert chat.maintain() == []  # nothing waits any more: no call
    reopened = fake_pager().conversation("c")
    assert [(p.keywords_by, p.worth) for p in reopened.pages[:4]] == [("llm-batch", True), ("llm-batch", False),
                                                                     ("llm-batch", True), ("llm-batch", False)]


def _advise_newest(prompt: str, grammar: str | None) -> str:
    """Eviction advice: name the newest candidate page listed in the prompt."""
    assert "Which pages are not needed" in prompt
    listed = [int(i) for i in re.findall(r"^p(\d+): ", prompt, re.M)]
    return f"[{max(listed)}]"


def test_cooperative_eviction_follows_the_side_contexts_advice(fake_pager):
    backend = ScriptedBackend(_advise_newest)
    lp = fake_pager(backend=backend)
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", eviction="cooperative",
                                                                 budget=200))
    first_batch = None
    for role, text in talk(80):
        before = {p.page_id for p in chat.pager.evicted}
        chat.add_turn(role, text)
        newly = {p.page_id for p in chat.pager.evicted} - before
        if newly and first_batch is None:
            first_batch = (newly, len(backend.calls))
    newly, calls = first_batch
    (advice,) = backend.calls[:calls]
    offered = [int(i) for i in re.findall(r"^p(\d+): ", advice.text, re.M)]
    assert max(offered) in newly  # the page the model named left first...
    assert min(offered) not in newly  # ...though FIFO would have evicted the oldest
    assert advice.backend == "fork1" and advice.grammar and "[]" in advice.grammar
    assert not chat.pager.pages[-1].evicted


def test_a_failing_side_context_falls_back_to_fifo_and_loses_no_turn(fake_pager):
    def broken(prompt, grammar):
        raise BackendError("side context failed")

    lp = fake_pager(backend=ScriptedBackend(broken))
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", eviction="cooperative",
                                                                 budget=200))
    fill(chat, 60)
    assert lp.backend.calls  # it was asked...
    evicted = [p.page_id for p in chat.pager.evicted]
    assert evicted == list(range(1, len(evicted) + 1)) and evicted  # ...and FIFO decided
    assert len(fake_pager().conversation("c").turns) == 60


def test_ingest_warns_of_a_turn_no_prompt_can_hold_and_stores_it(fake_pager, tmp_path):
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"id": "long", "turns": [{"role": "user", "text": "short one"},
                                                        {"role": "assistant", "text": "word " * 5000}]}) + "\n")
    lp = fake_pager()
    report = lp.ingest(path)
    assert report.turns == 2 and len(report.warnings) == 1
    assert report.warnings[0].startswith("long: turn 1 is ") and "longer than a 2048-token context" in report.warnings[0]
    assert lp.store.turns("long")[1].text == "word " * 5000  # stored, whole


def test_saved_kv_caches_beside_a_store_are_capped(tmp_path):
    from localpager.backends.base import ChatBackend
    from localpager.store.kvstate import PrefixStates

    class Saving(ChatBackend):
        """Just enough of a backend to be saved: it writes the tokens it holds."""

        saves_state = True

        def __init__(self):
            self.tokens = []

        def state_key(self):
            return "m"

        def cached_tokens(self):
            return self.tokens

        def save_state(self, path):
            path.write_text(repr(self.tokens))
            return True

        def load_state(self, path):
            return 0

    states, backend = PrefixStates(tmp_path / "s.db", keep=2), Saving()
    for i, conv in enumerate("abcd"):
        states.switch_to(conv, backend)  # saves the previous owner's cache
        backend.tokens = [i]
    states.save(backend)
    kept = sorted(p.name for p in tmp_path.glob("s.db.kv-*"))
    assert len(kept) == 2 and kept == sorted(states.path(c, backend).name for c in "cd")


def test_replacing_a_conversation_another_writer_holds_waits_then_says_it_is_busy(fake_pager, generated):
    import threading

    from localpager.store.locks import LockTimeout, conversation_lock

    conv, path = generated
    lp = fake_pager()
    lp.ingest(path)
    lp.lock_timeout = 0.3
    held, release = threading.Event(), threading.Event()

    def other_writer():
        with conversation_lock(lp.store.path, conv.id, 5):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=other_writer)
    thread.start()
    held.wait(5)
    try:
        with pytest.raises(LockTimeout, match="busy"):
            lp.ingest(path, replace=True)
    finally:
        release.set()
        thread.join()
    assert lp.ingest(path, replace=True).conversations == 1  # once it is free, the replace goes through
