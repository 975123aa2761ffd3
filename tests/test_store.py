"""The SQLite store: durability, atomicity, permissions, migrations."""

from __future__ import annotations

import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localpager.core.records import Page, Probe, Turn
from localpager.store.sqlite import MIGRATIONS, SCHEMA_VERSION, Store, StoreError

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"
needs_locomo = pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo data not beside the repository")


def sample(conv_id="c1"):
    turns = [Turn("user", "I'm allergic to peanuts", 0), Turn("assistant", "Noted", 1, time="t1")]
    pages = [Page(1, 0, 1, token_count=12, keywords=["peanuts"], evicted=True)]
    probes = [Probe("Which snack to avoid?", ["peanuts"], [0], "allergy", at=1)]
    return conv_id, turns, pages, probes


def test_reopen_after_close_keeps_everything(tmp_path):
    path = tmp_path / "s.db"
    with Store(path) as s:
        s.save_conversation(*sample(), settings={"budget": 512})
        s.add_trace("c1", 1, {"decision": "answer"})
    with Store(path) as s:
        assert [t.text for t in s.turns("c1")] == ["I'm allergic to peanuts", "Noted"]
        page = s.pages("c1")[0]
        assert page.keywords == ["peanuts"] and page.evicted and page.text.startswith("user: I'm allergic")
        assert s.probes("c1")[0].at == 1 and s.settings("c1")["budget"] == 512
        assert s.traces("c1")[0]["decision"] == "answer"


def test_store_file_is_private(tmp_path):
    path = tmp_path / "deep" / "s.db"
    Store(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_many_conversations_and_duplicate_ids(store):
    store.save_conversation(*sample("a"))
    store.save_conversation(*sample("b"))
    assert [c.id for c in store.list_conversations()] == ["a", "b"]
    with pytest.raises(StoreError, match="already exists"):
        store.save_conversation(*sample("a"))
    store.save_conversation(*sample("a"), replace=True)
    assert len(store.list_conversations()) == 2


def test_a_failed_change_leaves_nothing(store):
    conv_id, turns, pages, probes = sample()
    bad_turns = turns + [Turn("user", "dup index", 0)]  # violates the primary key half-way through
    with pytest.raises(sqlite3.IntegrityError):
        store.save_conversation(conv_id, bad_turns, pages, probes)
    assert not store.has_conversation(conv_id)
    assert store._query("SELECT COUNT(*) FROM turns")[0][0] == 0


def test_migrations_upgrade_an_old_store(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(MIGRATIONS[0] + "; PRAGMA user_version = 1;")
    conn.execute("INSERT INTO conversations (id, created_at) VALUES ('old', 0)")
    conn.commit()
    conn.close()
    with Store(path) as s:
        assert s.schema_version == SCHEMA_VERSION
        assert s.has_conversation("old")
        s.add_trace("old", 0, {"ok": True})  # a table from a later migration


def test_newer_schema_and_garbage_files_are_clear_errors(tmp_path):
    newer = tmp_path / "newer.db"
    conn = sqlite3.connect(newer)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        Store(newer)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreError, match="cannot open store"):
        Store(garbage)
    assert garbage.read_bytes().startswith(b"this is not")  # untouched


INGEST = """
import sys
from localpager.memory.api import LocalPager
LocalPager(sys.argv[1]).ingest(sys.argv[2])
"""


@pytest.mark.model  # LocalPager without a backend counts tokens with the GGUF tokenizer
@needs_locomo
def test_killed_ingest_leaves_no_partial_conversation(tmp_path):
    """SIGKILL while LoCoMo is being ingested: every stored conversation is whole."""
    path = tmp_path / "s.db"
    proc = subprocess.Popen([sys.executable, "-c", INGEST, str(path), str(LOCOMO)])
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if path.exists():
                try:
                    with sqlite3.connect(path) as c:
                        if c.execute("SELECT COUNT(*) FROM conversations").fetchone()[0] >= 2:
                            break
                except sqlite3.Error:
                    pass
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    from localpager.store.loaders import load_conversations

    expected = {c.id: len(c.turns) for c in load_conversations(LOCOMO).conversations}
    with Store(path) as s:
        stored = s.list_conversations()
        assert 2 <= len(stored) < 10, "the kill should land mid-ingest"
        for info in stored:
            assert info.turns == expected[info.id]
            pages = s.pages(info.id)
            assert pages[0].first_turn == 0 and pages[-1].last_turn == info.turns - 1


@pytest.mark.model  # LocalPager without a backend counts tokens with the GGUF tokenizer
def test_a_pinned_page_stays_resident_across_reopen(tmp_path):
    from localpager.core.pager import PagingConfig
    from localpager.memory.api import LocalPager

    lp = LocalPager(tmp_path / "s.db")
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", budget=200))
    for i in range(5):
        chat.add_turn("user" if i % 2 == 0 else "assistant", f"remember the blue door number {i}")
    chat.pin(1)
    for i in range(5, 80):
        chat.add_turn("user" if i % 2 == 0 else "assistant", f"small talk about the weather, day {i}")
    assert chat.pager.evicted and not chat.pages[0].evicted
    evicted = [p.evicted for p in chat.pages]
    lp.close()
    reopened = LocalPager(tmp_path / "s.db").conversation("c")
    assert reopened.pages[0].pinned and not reopened.pages[0].evicted
    assert [p.evicted for p in reopened.pages] == evicted
