"""The store on PostgreSQL (issue 25): one schema and migration list for both engines, store URLs, the extra,
migrations once under an advisory lock, the per-conversation advisory lock (its wait, its one line, its
release when the holder is killed), replicas noticing each other's changes, and `localpager --store
postgresql://…` commands end to end. A real cluster (tests/postgres_cluster.py), the fakes for the models.
The shared store, memory-control and server tests run on PostgreSQL too (modules marked ``both_stores``)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from localpager.cli import cli
from localpager.core.pager import PagingConfig
from localpager.store import schema
from localpager.store.location import open_store, store_location
from localpager.store.base import StoreError
from localpager.store.sqlite import MIGRATIONS, SQLiteStore

ROOT = Path(__file__).resolve().parents[2]
SMALL = PagingConfig(boundary="fixed_5", budget=60)
# The SQLite migrations as shipped: rendering the shared list must never change one (add one instead).
SHIPPED = ["7a4eec5238319924", "cf01a97ed40167f9", "b8722845ded29400", "6f655b016725f7cc", "42fbd4db65aa2fd3",
           "e06df34b8c3dfab7", "c2295ddd1e96c785", "5d45c67213ad5dba", "76e91c1a593191fa", "f838eb4a40ba87a6",
           "2bf89e1f62bf1b1f", "a2a7ab89ac056055"]


@pytest.fixture
def pg_url(postgres_cluster):
    """A fresh, empty database (no schema yet) of the session's cluster."""
    name = f"e_{uuid.uuid4().hex[:16]}"
    postgres_cluster.sql(f"CREATE DATABASE {name}")
    yield postgres_cluster.url(name)
    postgres_cluster.sql(f"DROP DATABASE {name} WITH (FORCE)")


# -- one schema, two dialects -------------------------------------------------------------------------
def test_the_sqlite_migrations_are_the_shipped_ones():
    assert [hashlib.sha256(m.encode()).hexdigest()[:16] for m in MIGRATIONS[:len(SHIPPED)]] == SHIPPED
    assert MIGRATIONS == schema.migrations("sqlite")
    assert len(schema.migrations("postgresql")) == len(MIGRATIONS)
    assert set(schema.DIALECTS["sqlite"]) == set(schema.DIALECTS["postgresql"])


def test_every_phrase_postgres_translates_is_in_the_shared_sql():
    from localpager.store.postgres import PHRASES, pg_sql

    source = (ROOT / "localpager/store/base.py").read_text()  # the SQL both stores share
    for phrase in PHRASES:
        assert phrase.strip(" ") in source or phrase == " IN ()", phrase
    assert pg_sql("SELECT 1 WHERE k LIKE ? || ':%' AND x IN ()") == "SELECT 1 WHERE k LIKE %s || ':%%' AND x IN (NULL)"


# -- store URLs ---------------------------------------------------------------------------------------
def test_a_url_is_never_a_sqlite_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert store_location("postgresql://u@h:5432/db") == "postgresql://u@h:5432/db"
    assert store_location(Path("postgresql://u@h:5432/db")) == "postgresql://u@h:5432/db"  # what Path leaves
    assert store_location("notes/m.db") == Path("notes/m.db")
    with pytest.raises(StoreError, match="unsupported store URL mysql://"):
        store_location("mysql://u@h/db")
    with pytest.raises(StoreError, match="is a database URL, not a file"):
        SQLiteStore("postgresql://u@h:5432/db")
    monkeypatch.setenv("LOCALPAGER_STORE", "postgresql://u@h:5432/db")
    assert store_location(None) == "postgresql://u@h:5432/db"
    with pytest.raises(StoreError, match="is a database URL"):
        SQLiteStore()
    result = CliRunner().invoke(cli, ["--store", "sqlite://x.db", "conversations"])
    assert result.exit_code == 1 and "unsupported store URL" in result.output
    assert list(tmp_path.iterdir()) == []  # no folder named postgresql: or sqlite:


def test_the_missing_extra_and_a_key_are_one_line_errors(monkeypatch, tmp_path):
    import builtins

    real_import = builtins.__import__

    def no_psycopg(name, *args, **kwargs):
        if name.split(".")[0] in ("psycopg", "psycopg_pool"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_psycopg)
    result = CliRunner().invoke(cli, ["--store", "postgresql://u@127.0.0.1:1/db", "conversations"])
    assert result.exit_code == 1
    assert result.output.strip() == "Error: a PostgreSQL store needs psycopg: pip install 'localpager[postgres]'"
    monkeypatch.undo()
    result = CliRunner().invoke(cli, ["--store", "postgresql://u@127.0.0.1:1/db", "--key-env", "K", "conversations"],
                                env={"K": "secret"})
    assert result.exit_code == 1 and "encryption at rest is the database's or its disk's job" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_an_unreachable_server_is_one_line(postgres_cluster):
    url = f"postgresql://postgres@127.0.0.1:{postgres_cluster.port}/no_such_db"
    result = CliRunner().invoke(cli, ["--store", url, "conversations"])
    assert result.exit_code == 1 and "cannot connect to store" in result.output and "no_such_db" in result.output
    assert len(result.output.strip().splitlines()) == 1


# -- migrations ---------------------------------------------------------------------------------------
def test_migrations_run_once_when_many_processes_open_a_new_database(pg_url):
    errors, opened = [], []

    def open_one():
        try:
            opened.append(open_store(pg_url))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(opened) == 6
    assert {s.schema_version for s in opened} == {len(MIGRATIONS)}
    for s in opened:
        s.close()
    with pytest.raises(StoreError, match="no store at"):  # reading commands never create one
        open_store(pg_url.rsplit("/", 1)[0] + "/postgres", create=False)


def test_a_newer_schema_is_a_clear_error(pg_url, postgres_cluster):
    open_store(pg_url).close()
    postgres_cluster.sql("UPDATE localpager.localpager_schema SET version = 99", pg_url.rsplit("/", 1)[1])
    with pytest.raises(StoreError, match="newer"):
        open_store(pg_url)


# -- locks and replicas -------------------------------------------------------------------------------
def test_the_conversation_lock_waits_says_busy_and_dies_with_its_holder(pg_url, fake_pager):
    from localpager.store.locks import LockTimeout, conversation_lock

    store = open_store(pg_url)
    held = conversation_lock(store, "c", 5)
    held.acquire()
    other = conversation_lock(store, "c", 0.3)
    started = time.monotonic()
    outcome = []
    t = threading.Thread(target=lambda: outcome.append(_try(other)))
    t.start()
    t.join()
    assert isinstance(outcome[0], LockTimeout) and time.monotonic() - started >= 0.3
    assert str(outcome[0]) == ("conversation 'c' is busy (another localpager process or thread is using it); "
                               "waited 0.3 s, try again when it has finished")
    assert _try(conversation_lock(store, "d", 0.3)) is None  # another conversation: not waited for
    held.release()

    # a process holding it killed with SIGKILL: PostgreSQL releases the lock with its connection
    code = ("import sys, time; from localpager.store.location import open_store; s = open_store(sys.argv[1]);"
            "lock = s.conversation_lock('c', 5); lock.acquire(); print('held', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, pg_url], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        assert isinstance(_try(conversation_lock(store, "c", 0.3)), LockTimeout)
        proc.kill()
        proc.wait()
        started = time.monotonic()
        lock = conversation_lock(store, "c", 5)
        lock.acquire()
        assert time.monotonic() - started < 3
        lock.release()
    finally:
        proc.kill()
    store.close()


def _try(lock):
    try:
        lock.acquire()
    except Exception as exc:  # noqa: BLE001
        return exc
    lock.release()
    return None


def test_a_replica_notices_another_replicas_changes(postgres_cluster, store_location_pg):
    from fakes import ScriptedBackend

    from localpager.memory.api import LocalPager, ModelOptions

    from fakes import HashEmbedder

    def replica():
        lp = LocalPager(store_location_pg, backend=ScriptedBackend(fallback=lambda p, g: "ok"),
                        options=ModelOptions(embedder=HashEmbedder()))
        return lp

    a, b = replica(), replica()
    try:
        ca = a.conversation("c", create=True, config=SMALL)
        for i in range(12):
            ca.add_turn("user", f"turn {i} about apples and number {i}")
        assert ca.search("apples", 1)  # a's pager, BM25 and per-conversation FAISS index are loaded
        cb = b.conversation("c")
        cb.add_turn("user", "the blue submarine is in the harbour")  # another replica writes
        assert ca.turns[-1].text == "the blue submarine is in the harbour"  # a reloads on its next read
        hit = ca.search("blue submarine harbour", 1)[0]
        assert hit.turn == 12  # and its vectors: the index was rebuilt from the rows
        ca.add_turn("user", "a's own turn after b's")  # a writes at the next index, not over b's turn
        assert [t.index for t in b.store.turns("c")] == list(range(14))
        cb.forget(turn=12)  # an erasure on b: a drops what it holds
        assert ca.turns[12].text == "" and all(h.turn != 12 for h in ca.search("blue submarine harbour", 5))
    finally:
        a.close()
        b.close()


@pytest.fixture
def store_location_pg(postgres_cluster):
    name = f"r_{uuid.uuid4().hex[:16]}"
    postgres_cluster.sql(f"CREATE DATABASE {name} TEMPLATE localpager_template")
    yield postgres_cluster.url(name)
    postgres_cluster.sql(f"DROP DATABASE {name} WITH (FORCE)")


# -- the commands -------------------------------------------------------------------------------------
def test_the_commands_work_on_postgresql(store_location_pg, tmp_path, monkeypatch):
    """ingest, conversations, bookmarks, search, forget, export and migrate-store through the CLI, on the
    fakes' tokenizer (no model file)."""
    from fakes import ScriptedBackend

    import localpager.memory.models as api
    from localpager.backends.tokenizers import BackendTokenCounter

    monkeypatch.setattr(api, "counter_for", lambda path=None: BackendTokenCounter(ScriptedBackend()))
    url = store_location_pg
    data = tmp_path / "c.jsonl"
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "text": f"turn {i}: the Zephyrine code is {i}"}
             for i in range(8)]
    data.write_text(json.dumps({"id": "conv", "turns": turns}) + "\n")

    def run(*args):
        return CliRunner().invoke(cli, ["--store", url, *args], catch_exceptions=False)

    assert run("ingest", str(data)).exit_code == 0
    listed = run("conversations")
    assert listed.exit_code == 0 and listed.output.startswith("conv\t")
    assert run("bookmarks", "conv").exit_code == 0
    out = tmp_path / "e.jsonl"
    assert run("export", "conv", "--output", str(out)).exit_code == 0
    assert json.loads(out.read_text())["id"] == "conv"
    forgot = run("forget", "conv", "--turn", "3")
    assert forgot.exit_code == 0 and "forgot 1 turns of conv" in forgot.output
    assert "note: PostgreSQL keeps what it wrote in its write-ahead log" in forgot.output  # said where it happens
    with open_store(url) as s:
        assert s.turns("conv")[3].text == "" and len(s.turns("conv")) == 8
    # from PostgreSQL into a SQLite file, and back into another PostgreSQL database
    sqlite = tmp_path / "copy.db"
    moved = run("migrate-store", url, str(sqlite))
    assert moved.exit_code == 0 and "copied 1 conversations" in moved.output, moved.output
    with SQLiteStore(sqlite) as s:
        copied = s.turns("conv")
        assert [t.text for t in copied][3] == "" and len(copied) == 8
    assert run("migrate-store", url, str(sqlite)).exit_code == 1  # already there: nothing is overwritten
