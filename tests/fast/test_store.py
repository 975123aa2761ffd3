"""The SQLite store: durability, atomicity, permissions, migrations (a killed ingest and a pinned page across a
reopen, with the real tokenizer: tests/model/test_store.py)."""

from __future__ import annotations

import sqlite3
import stat

import pytest

from localpager.core.facts import FACTS_VERSION
from localpager.core.records import Page, Probe, Turn
from localpager.store.base import SCHEMA_VERSION, StoreError
from localpager.store.sqlite import MIGRATIONS, SQLiteStore

pytestmark = pytest.mark.both_stores  # the tests that take `store` run on SQLite and on PostgreSQL


def sample(conv_id="c1"):
    turns = [Turn("user", "I'm allergic to peanuts", 0), Turn("assistant", "Noted", 1, time="t1")]
    pages = [Page(1, 0, 1, token_count=12, keywords=["peanuts"], evicted=True)]
    probes = [Probe("Which snack to avoid?", ["peanuts"], [0], "allergy", at=1)]
    return conv_id, turns, pages, probes


def test_reopen_after_close_keeps_everything(tmp_path):
    path = tmp_path / "s.db"
    with SQLiteStore(path) as s:
        s.save_conversation(*sample(), settings={"budget": 512})
        s.add_trace("c1", 1, {"decision": "answer"})
    with SQLiteStore(path) as s:
        assert [t.text for t in s.turns("c1")] == ["I'm allergic to peanuts", "Noted"]
        page = s.pages("c1")[0]
        assert page.keywords == ["peanuts"] and page.evicted and page.text.startswith("user: I'm allergic")
        assert s.probes("c1")[0].at == 1 and s.settings("c1")["budget"] == 512
        assert s.traces("c1")[0]["decision"] == "answer"


def test_store_file_is_private(tmp_path):
    path = tmp_path / "deep" / "s.db"
    SQLiteStore(path).close()
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
    with pytest.raises(sqlite3.IntegrityError if store.kind == "sqlite" else StoreError):
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
    with SQLiteStore(path) as s:
        assert s.schema_version == SCHEMA_VERSION
        assert s.has_conversation("old")
        s.add_trace("old", 0, {"ok": True})  # a table from a later migration


def test_a_store_of_schema_11_migrates_its_highest_fact_id(tmp_path):
    """Migration 12 keeps, per conversation, the highest fact id it had, so that a fact made after it takes a new
    id: with the facts of schema 11, the highest there is."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    for migration in MIGRATIONS[:11]:
        conn.executescript(migration)
    conn.execute("PRAGMA user_version = 11")
    conn.execute("INSERT INTO conversations (id, created_at, facts) VALUES ('old', 0, ?), ('none', 0, ?)",
                 (FACTS_VERSION, FACTS_VERSION))
    conn.execute("INSERT INTO turns (conv_id, idx, role, text) VALUES ('old', 0, 'user', 'My locker code is 4471.')")
    conn.execute("INSERT INTO facts (conv_id, fact_id, turn_idx, kind, subject, text)"
                 " VALUES ('old', 7, 0, 'number', 'code locker', 'My locker code is 4471.')")
    conn.commit()
    conn.close()
    with SQLiteStore(path) as s:
        assert s._query("SELECT id, last_fact FROM conversations ORDER BY id") == [("none", 0), ("old", 7)]
        s.append_turn("old", Turn("user", "I'm allergic to peanuts.", 1))
        assert [f.fact_id for f in s.facts("old")] == [7, 8]


def test_newer_schema_and_garbage_files_are_clear_errors(tmp_path):
    newer = tmp_path / "newer.db"
    conn = sqlite3.connect(newer)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        SQLiteStore(newer)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreError, match="cannot open store"):
        SQLiteStore(garbage)
    assert garbage.read_bytes().startswith(b"this is not")  # untouched




def test_an_empty_store_is_removed_and_one_holding_a_conversation_kept(tmp_path):
    from localpager.store.locks import lock_dir
    from localpager.store.sqlite import SQLiteStore, remove_empty

    empty, kept, garbage = tmp_path / "empty.db", tmp_path / "kept.db", tmp_path / "garbage.db"
    SQLiteStore(empty).close()
    assert empty.exists() and remove_empty(empty)
    assert not empty.exists() and not lock_dir(empty).exists()
    store = SQLiteStore(kept)
    store.create_conversation("c", settings={})
    store.close()
    assert not remove_empty(kept) and kept.exists()
    garbage.write_bytes(b"not a database" * 100)
    assert not remove_empty(garbage) and garbage.exists()  # not a store: left as it is
