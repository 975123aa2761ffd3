"""Opening and reading a conversation loads no model and writes nothing; a budget given for one question
or one session leaves the stored one alone. On the fakes (tests/fakes.py): no model file, milliseconds."""

from __future__ import annotations

import sqlite3

import pytest
from fakes import ScriptedBackend, shortest_sentence

from localpager.core.pager import PagingConfig
from localpager.memory.api import LocalPager

TOPICS = ["the garden fence", "my sister Hartley", "the Lisbon flight", "a peanut allergy", "the kitchen budget",
          "the Tuesday dentist", "the router password", "the piano lessons"]


def fill(chat, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        chat.add_turn("user" if i % 2 == 0 else "assistant",
                      f"Turn {i} is about {TOPICS[(i // 5) % len(TOPICS)]} number {i}.")


def reply(prompt: str, grammar: str | None) -> str:
    """Any call: the shortest reply a grammar allows, else a short answer."""
    return shortest_sentence(grammar) if grammar else "Noted, thanks."


def dump(path) -> list[str]:
    """Every row (and the schema) of the store as SQL, sorted: equal dumps, equal stores. The change
    counters (``generation``, ``counters``: bookkeeping every write moves) are left out."""
    with sqlite3.connect(path) as conn, sqlite3.connect(":memory:") as copy:
        conn.backup(copy)
        copy.execute("UPDATE conversations SET generation = 0")
        copy.execute("DELETE FROM counters")
        return sorted(copy.iterdump())


class Doubled(ScriptedBackend):
    """Another model: twice the tokens for the same text."""

    def count_tokens(self, text):
        return 2 * super().count_tokens(text)


@pytest.fixture
def stored(tmp_path, fake_pager):
    """A store with conversation 'c' paged under the tokenizer 'a.gguf': 40 turns, pages evicted, a trace."""
    path = tmp_path / "store.db"
    lp = fake_pager(backend=ScriptedBackend(reply, model_name="a.gguf"), path=path)
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", budget=200))
    fill(chat, 40)
    assert chat.pager.evicted
    lp.store.add_trace("c", 39, {"question": "q", "answer": "a"})
    lp.close()
    return path


def no_counter(monkeypatch):
    """Fail the test if anything asks the LocalPager for a token counter."""
    def refuse(self):
        pytest.fail("the token counter was loaded")

    monkeypatch.setattr(LocalPager, "counter", refuse)


# -- 1. opening and reading -------------------------------------------------------------------------------
def test_opening_and_reading_load_no_model_and_write_nothing(stored, monkeypatch):
    before = dump(stored)
    no_counter(monkeypatch)
    lp = LocalPager(stored, model="/nonexistent.gguf")  # the real backend, on a model that is not there
    chat = lp.conversation("c")
    assert len(chat.turns) == 40 and chat.pages and [p for p in chat.pages if p.evicted]
    assert len(chat.bookmarks()) == len(chat.pages) and chat.bookmarks("structured")[0].startswith("[p1:")
    assert chat.traces()[0]["answer"] == "a"
    assert chat.budget == 200 and [c.id for c in lp.conversations()] == ["c"]
    assert lp.models.loaded is None and lp.held._index is None and lp.models._runtime is None
    lp.close()
    assert dump(stored) == before


def test_opening_reads_only_the_settings(stored, monkeypatch):
    lp = LocalPager(stored, model="/nonexistent.gguf")
    read = []
    for name in ("turns", "pages", "traces"):
        original = getattr(lp.store, name)
        monkeypatch.setattr(lp.store, name, lambda *a, _f=original, _n=name, **k: read.append(_n) or _f(*a, **k))
    chat = lp.conversation("c")
    assert read == []
    chat.traces()
    assert read == ["traces"]  # the log needs no turns or pages
    lp.close()


def test_pin_writes_only_the_pinned_flag(stored, monkeypatch):
    before = dump(stored)
    no_counter(monkeypatch)
    lp = LocalPager(stored, model="/nonexistent.gguf")
    page = lp.conversation("c").pin(2)
    assert page.pinned
    lp.close()
    after = dump(stored)
    (removed,), (added,) = set(before) - set(after), set(after) - set(before)
    assert removed.startswith('INSERT INTO "pages" VALUES(\'c\',2,')
    fields = removed.split(",")  # ... access_count, last_access, pinned, evicted, keywords_by, worth
    fields[-4] = "1"
    assert added == ",".join(fields)  # page 2's pinned flag and nothing else


def test_an_unknown_conversation_is_refused_at_open(stored):
    lp = LocalPager(stored, model="/nonexistent.gguf")
    with pytest.raises(Exception, match="no conversation 'nope'"):
        lp.conversation("nope")
    lp.close()


def test_reading_under_another_tokenizer_keeps_the_stored_counts(stored, fake_pager):
    before = dump(stored)
    lp = fake_pager(backend=Doubled(reply, model_name="b.gguf"), path=stored)
    chat = lp.conversation("c")
    stored_counts = [p.token_count for p in lp.store.pages("c")]
    assert [p.token_count for p in chat.pages] == stored_counts
    chat.bookmarks(), chat.traces(), chat.turns
    assert dump(stored) == before  # no recount, no settings rewritten
    assert lp.store.settings("c")["tokenizer"] == "a.gguf"


@pytest.mark.parametrize("use", ["add_turn", "set_budget", "ask", "count"])
def test_the_first_use_that_needs_counts_recounts_under_this_tokenizer(stored, fake_pager, use):
    lp = fake_pager(backend=Doubled(reply, model_name="b.gguf"), path=stored)
    chat = lp.conversation("c")
    old = {p.page_id: p.token_count for p in chat.pages}
    if use == "add_turn":
        chat.add_turn("user", "One more thing about the garden fence.")
    elif use == "set_budget":
        chat.set_budget(400)
    elif use == "ask":
        chat.ask("What about the fence?", remember=False)
    else:  # a count asked of the pager itself loads the tokenizer the same way
        chat.pager.memory_tokens()
    assert lp.store.settings("c")["tokenizer"] == "b.gguf"
    closed = chat.pages[:-1]  # the newest page may have grown with the new turn
    overhead = chat.config.turn_overhead
    assert all(p.token_count == 2 * old[p.page_id] - overhead * len(p.turn_range) for p in closed)
    assert [p.token_count for p in lp.store.pages("c")] == [p.token_count for p in chat.pages]


def test_a_new_conversation_is_counted_on_its_first_turn(fake_pager):
    lp = fake_pager(backend=ScriptedBackend(reply, model_name="a.gguf"))
    chat = lp.conversation("new", create=True)
    assert "tokenizer" not in lp.store.settings("new")
    chat.add_turn("user", "hello")
    assert lp.store.settings("new")["tokenizer"] == "a.gguf"


# -- 3. budgets for one question, one session, or stored ----------------------------------------------------
def test_a_budget_for_one_question_pages_under_it_and_leaves_the_stored_one(stored, fake_pager):
    lp = fake_pager(backend=ScriptedBackend(reply, model_name="a.gguf"), path=stored)
    chat = lp.conversation("c")
    evicted_before = len(chat.pager.evicted)
    seen = []
    original = lp.runtime.answer

    def spy(pager, question, **kw):
        seen.append((pager.config.budget, pager.memory_tokens() <= 120 or not pager.evictable()))
        return original(pager, question, **kw)

    lp.runtime.answer = spy
    chat.ask("What about the piano lessons?", budget=120)
    (budget, within), = seen
    assert budget == 120 and within  # paged under the question's budget
    assert len(chat.pager.evicted) > evicted_before  # what it evicted stays evicted
    assert chat.budget == 200 and chat.config.budget == 200 and lp.store.settings("c")["budget"] == 200
    assert chat.pager.memory_tokens() <= 200
    assert lp.conversation("c").budget == 200  # opened again: the stored budget
    assert len(lp.store.turns("c")) == 42  # the question and the answer are stored as usual


def test_a_larger_budget_for_one_question_gives_way_to_the_stored_one_after_it(stored, fake_pager):
    lp = fake_pager(backend=ScriptedBackend(reply, model_name="a.gguf"), path=stored)
    chat = lp.conversation("c")
    chat.ask("Anything about the dentist?", budget=1000)
    assert chat.budget == 200 and lp.store.settings("c")["budget"] == 200
    assert chat.pager.memory_tokens() <= 200  # the stored budget is enforced again at once
    assert [p.evicted for p in lp.store.pages("c")] == [p.evicted for p in chat.pages]


def test_a_session_budget_is_not_stored(stored, fake_pager):
    lp = fake_pager(backend=ScriptedBackend(reply, model_name="a.gguf"), path=stored)
    chat = lp.conversation("c")
    chat.set_budget(100, save=False)
    within = lambda budget: chat.pager.memory_tokens() <= budget or not chat.pager.evictable()
    assert chat.budget == 100 and within(100)
    fill(chat, 10, start=40)
    assert chat.budget == 100 and within(100)  # the whole session pages under it
    assert lp.store.settings("c")["budget"] == 200
    assert [p.evicted for p in lp.store.pages("c")] == [p.evicted for p in chat.pages]  # evictions are stored
    chat.ask("And the router password?", budget=150)
    assert chat.budget == 100  # back to the session's budget, not the stored one
    assert lp.conversation("c").budget == 200
    chat.set_budget(300)  # saved: the session's budget gives way to it
    assert chat.budget == 300 and lp.store.settings("c")["budget"] == 300
    assert lp.conversation("c").budget == 300


@pytest.mark.parametrize("budget", [0, -5])
def test_a_budget_below_one_is_refused_before_anything_is_stored(stored, fake_pager, budget):
    lp = fake_pager(backend=ScriptedBackend(reply, model_name="a.gguf"), path=stored)
    before = dump(stored)
    chat = lp.conversation("c")
    with pytest.raises(ValueError, match="budget must be a positive number"):
        chat.ask("What about the fence?", budget=budget)
    with pytest.raises(ValueError, match="budget must be a positive number"):
        chat.set_budget(budget)
    with pytest.raises(ValueError, match="budget must be a positive number"):
        chat.set_budget(budget, save=False)
    assert lp.backend.calls == [] and chat.budget == 200
    lp.close()
    assert dump(stored) == before
