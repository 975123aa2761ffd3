"""Users (issue 40): a conversation may belong to a user, in the store (migration 10, both engines), the library
(``LocalPager.conversation(..., user=)``, ``LocalPager.user``), the interchange format and the command line; one
user's memory never shows in another's, or in a conversation of nobody's. The fakes for the models."""

from __future__ import annotations

import json
import sqlite3
import uuid

import pytest

from localpager.core.records import Page, Turn
from localpager.store.base import SCHEMA_VERSION, StoreError
from localpager.store.location import open_store
from localpager.store.sqlite import MIGRATIONS, SQLiteStore

pytestmark = pytest.mark.both_stores  # the tests that take a store run on SQLite and on PostgreSQL


def one_turn(text: str = "I'm allergic to sesame."):
    return [Turn("user", text, 0)], [Page(1, 0, 0, token_count=8)]


# -- the store ----------------------------------------------------------------------------------------
def test_a_conversation_may_belong_to_a_user(store):
    store.create_conversation("mon", user="alice")
    store.create_conversation("tue", user="alice")
    store.create_conversation("bob-1", user="bob")
    store.create_conversation("nobody")
    assert [(c.id, c.user) for c in store.list_conversations()] == [
        ("mon", "alice"), ("tue", "alice"), ("bob-1", "bob"), ("nobody", None)]
    assert [c.id for c in store.list_conversations(user="alice")] == ["mon", "tue"]
    assert [c.id for c in store.list_conversations(user="carol")] == []
    assert store.conversation_user("bob-1") == "bob" and store.conversation_user("nobody") is None
    assert store.conversation_record("tue")["user"] == "alice"
    assert store.users() == ["alice", "bob"]
    with pytest.raises(StoreError, match="no conversation 'gone'"):
        store.conversation_user("gone")


def test_a_user_name_is_checked_as_an_id_is(store):
    for bad, why in (("", "non-empty"), ("al\nice", "control or invisible"), (" alice", "space"),
                     ("a" * 201, "at most 200")):
        with pytest.raises(StoreError, match=f"user name .*{why}") as caught:
            store.create_conversation("c", user=bad)
        assert len(str(caught.value).splitlines()) == 1
    assert not store.has_conversation("c")


def test_a_replaced_conversation_keeps_its_user_and_another_users_is_not_replaced(store):
    turns, pages = one_turn()
    store.save_conversation("c", turns, pages, user="alice")
    store.save_conversation("c", turns, pages, replace=True)  # no user given: still alice's
    assert store.conversation_user("c") == "alice"
    with pytest.raises(StoreError, match="belongs to user 'alice', not 'bob'"):
        store.save_conversation("c", turns, pages, replace=True, user="bob")
    assert store.conversation_user("c") == "alice" and [t.text for t in store.turns("c")] == [turns[0].text]


def test_migrating_a_store_copies_its_users(store, tmp_path):
    from localpager.store.migrate import migrate_store

    turns, pages = one_turn()
    store.save_conversation("a", turns, pages, user="alice")
    store.save_conversation("n", turns, pages)
    with SQLiteStore(tmp_path / "copy.db") as target:
        migrate_store(store, target)
        assert [(c.id, c.user) for c in target.list_conversations()] == [("a", "alice"), ("n", None)]


def test_an_existing_sqlite_store_migrates_with_every_conversation_userless(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    for migration in MIGRATIONS[:9]:  # the store as localpager left it before users
        conn.executescript(migration)
    conn.execute("PRAGMA user_version = 9")
    conn.execute("INSERT INTO conversations (id, created_at) VALUES ('old-1', 1), ('old-2', 2)")
    conn.commit()
    conn.close()
    with SQLiteStore(path) as s:
        assert s.schema_version == SCHEMA_VERSION == 10
        assert [(c.id, c.user) for c in s.list_conversations()] == [("old-1", None), ("old-2", None)]
        assert s.users() == [] and s.list_conversations(user="alice") == []
        names = [r[1] for r in s._query("PRAGMA index_list(conversations)")]
        assert "conversations_user" in names


@pytest.mark.postgres
def test_an_existing_postgres_store_migrates_with_every_conversation_userless(postgres_cluster):
    import psycopg

    from localpager.store.postgres import PG_MIGRATIONS

    name = f"u_{uuid.uuid4().hex[:16]}"
    postgres_cluster.sql(f"CREATE DATABASE {name}")
    try:
        with psycopg.connect(postgres_cluster.url(name), autocommit=True) as conn:
            conn.execute("CREATE SCHEMA localpager")
            conn.execute("SET search_path TO localpager")
            conn.execute("CREATE TABLE localpager_schema (version INTEGER NOT NULL)")
            for migration in PG_MIGRATIONS[:9]:
                conn.execute(migration)
            conn.execute("INSERT INTO localpager_schema (version) VALUES (9)")
            conn.execute("INSERT INTO conversations (id, created_at) VALUES ('old-1', 1), ('old-2', 2)")
        with open_store(postgres_cluster.url(name)) as s:
            assert s.schema_version == SCHEMA_VERSION
            assert [(c.id, c.user) for c in s.list_conversations()] == [("old-1", None), ("old-2", None)]
        stats = postgres_cluster.sql(
            "SELECT attstattarget FROM pg_attribute WHERE attrelid = 'localpager.conversations'::regclass"
            " AND attname = 'user_name'", name)
        assert stats == [(0,)]  # a person's name keeps no planner statistics
    finally:
        postgres_cluster.sql(f"DROP DATABASE {name} WITH (FORCE)")
