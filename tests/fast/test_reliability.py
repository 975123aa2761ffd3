"""Reliability on the fakes: many writers, crashes between a question and its answer, stale indexes, bad
input and bad stores give one-line errors and leave the store as it was. No model file, no network."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import click
import pytest
from conftest import NetworkRefused
from fakes import HashEmbedder, ScriptedBackend, shortest_sentence
from helpers import ROOT, TESTS, run_cli_here, serving

from localpager.core.pager import PagingConfig
from localpager.memory.api import LocalPager, ModelOptions
from localpager.memory.conversation import NO_ANSWER
from localpager.retrieval.index import PageIndex
from localpager.store.loaders import ConversationFileError, load_conversations
from localpager.store.locks import conversation_lock
from localpager.store.base import SCHEMA_VERSION, ConversationBusy, StoreError
from localpager.store.sqlite import SQLiteStore

NO_MODELS = {"LOCALPAGER_MODEL": "/nonexistent.gguf", "LOCALPAGER_EMBEDDER": "/nonexistent-embedder"}


def reply(prompt, grammar):
    return shortest_sentence(grammar) if grammar else "Noted, thanks."


def cli(*args, store, env=None):
    """The command in this process, with no usable model (what a process of its own prints is on stderr)."""
    return run_cli_here(*args, store=store, env={**NO_MODELS, **(env or {})}, check=False)


def cli_process(*args, store, env=None):
    """The command in a process of its own: for a model file that must not be loaded in the test's process."""
    cmd = [sys.executable, "-m", "localpager.cli", "--store", str(store), *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, **NO_MODELS, **(env or {})})


def one_line_error(proc) -> str:
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 or lines[-1].startswith("Error:"), proc.stderr
    return lines[-1]


def dump(path, immutable: bool = False) -> list[str]:
    """Every row of the store (``immutable``: read without creating anything beside it; the WAL must be
    checkpointed)."""
    target = f"file:{path}?mode=ro&immutable=1" if immutable else str(path)
    with sqlite3.connect(target, uri=immutable) as conn:
        return sorted(conn.iterdump())


@pytest.fixture
def chat(fake_pager):
    lp = fake_pager(backend=ScriptedBackend(reply, model_name="fake.gguf"))
    c = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", budget=120))
    for i in range(12):
        c.add_turn("user" if i % 2 == 0 else "assistant", f"Turn {i} about the fence and Lisbon number {i}.")
    return c


# -- no network ------------------------------------------------------------------------------------------
def test_the_network_guard_refuses_outbound_and_allows_loopback():
    with pytest.raises(NetworkRefused):
        socket.create_connection(("93.184.216.34", 80), timeout=1)
    with pytest.raises(NetworkRefused), socket.socket() as s:
        s.connect_ex(("10.1.2.3", 443))
    with pytest.raises(NetworkRefused):
        socket.create_connection(("example.com", 80), timeout=1)  # refused before any DNS lookup
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname(), timeout=1):
            pass


# -- many writers ----------------------------------------------------------------------------------------
def test_processes_opening_a_new_store_at_once_migrate_it_once(tmp_path):
    path = tmp_path / "new.db"
    code = ("import sys; from localpager.store.sqlite import SQLiteStore; s = SQLiteStore(sys.argv[1]); "
            "print(s.schema_version); s.close()")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT) for _ in range(6)]
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, [err for _, err in results]
    assert {out.strip() for out, _ in results} == {str(SCHEMA_VERSION)}


def test_two_pagers_on_one_conversation_never_collide(tmp_path, fake_pager):
    path = tmp_path / "s.db"
    a = fake_pager(backend=ScriptedBackend(reply, model_name="fake.gguf"), path=path).conversation("c", create=True)
    b = fake_pager(backend=ScriptedBackend(reply, model_name="fake.gguf"), path=path).conversation("c")
    a.add_turn("user", "first from a")
    assert len(b.turns) == 1  # b loaded after a's turn
    a.add_turn("assistant", "second from a")  # b's pager is now stale
    b.add_turn("user", "third from b")  # read again inside the lock: index 2, not a clash on 1
    a.ask("fourth from a, a question?")
    assert [t.text for t in SQLiteStore(path).turns("c")][:5] == [
        "first from a", "second from a", "third from b", "fourth from a, a question?", "Noted, thanks."]


def test_a_second_asker_waits_then_is_told_the_conversation_is_busy(chat):
    chat.held.lock_timeout = 0.3
    other = conversation_lock(chat.store.path, "c", 1)  # another process's hold (its own file descriptor)
    held = threading.Event()
    release = threading.Event()

    def hold():
        other.acquire()
        held.set()
        release.wait(5)
        other.release()

    t = threading.Thread(target=hold)
    t.start()
    held.wait(5)
    before = len(chat.store.turns("c"))
    with pytest.raises(ConversationBusy, match="conversation 'c' is busy .* waited 0.3 s"):
        chat.ask("Where is the fence?")
    release.set()
    t.join()
    assert len(chat.store.turns("c")) == before  # nothing stored while busy
    chat.ask("Where is the fence?")  # and it works once the other has finished
    assert len(chat.store.turns("c")) == before + 2


def test_a_store_locked_by_another_writer_is_a_one_line_busy_error(chat, monkeypatch):
    import localpager.store.sqlite as store_module

    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_MS", 200)
    store = SQLiteStore(chat.store.path)
    other = sqlite3.connect(chat.store.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError, match="is busy"):
            store.update_settings("c", {"budget": 300})
    finally:
        other.execute("ROLLBACK")
        store.close()


# -- a question whose answer never came --------------------------------------------------------------------
def interrupted(prompt, grammar):
    raise KeyboardInterrupt  # the user pressed Ctrl-C while the model ran


def test_a_question_left_by_a_dead_process_is_marked_and_the_next_prompt_knows(chat, fake_pager, tmp_path):
    from localpager.core.records import Turn

    store = chat.store
    n = len(store.turns("c"))
    # what a process killed while the model ran leaves: the question, marked unanswered, and nothing after
    store.append_turn("c", Turn("user", "What was the fence budget?", n), unanswered=True)
    assert store.unanswered("c") == [n]
    proc = cli("log", "c", store=store.path)
    assert "no answer, unanswered" in proc.stdout
    lp = fake_pager(backend=ScriptedBackend(reply, model_name="fake.gguf"), path=store.path)
    lp.conversation("c").ask("Tell me more about Lisbon.")
    turns = store.turns("c")
    assert [t.text for t in turns[n:n + 3]] == ["What was the fence budget?", NO_ANSWER, "Tell me more about Lisbon."]
    assert store.unanswered("c") == []
    statuses = [t.get("status") for t in store.traces("c")]
    assert statuses.count("interrupted") == 1
    assert any(NO_ANSWER in c.text for c in lp.backend.calls)  # the next prompt shows it went unanswered


def test_a_failed_answer_is_marked_at_once(chat, fake_pager):
    lp = fake_pager(backend=ScriptedBackend(interrupted, model_name="fake.gguf"), path=chat.store.path)
    with pytest.raises(KeyboardInterrupt):
        lp.conversation("c").ask("Where is the fence?")
    turns = chat.store.turns("c")
    assert [t.text for t in turns[-2:]] == ["Where is the fence?", NO_ANSWER]
    trace = chat.store.traces("c")[-1]
    assert trace["status"] == "interrupted" and "KeyboardInterrupt" in trace["reason"]


# -- stale indexes -----------------------------------------------------------------------------------------
def test_the_saved_index_is_stale_after_a_delete_and_a_re_insert(tmp_path):
    from localpager.core.records import Page, Turn
    from localpager.retrieval.index import SignalIndex

    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    embedder = HashEmbedder()
    index = PageIndex(store, embedder)

    def save(text):
        turns = [Turn("user", text, 0)]
        pages = [Page(1, 0, 0, token_count=3, text=f"user: {text}")]
        store.save_conversation("c", turns, pages, replace=True)
        index.update("c", pages, turns, lambda p: "p1")
        return index.signal("turn")

    save("apples and pears")
    rows_before = store.embedding_rows("turn", vectors=False)
    store.delete_conversation("c")
    save("volcanoes and glaciers")  # same count, same rowids, other vectors
    assert [r[0] for r in store.embedding_rows("turn", vectors=False)] == [r[0] for r in rows_before]
    reopened = SignalIndex(store, "turn", embedder.dim)
    (rowid, score), = reopened.search(embedder.encode_one("volcanoes and glaciers"), [rows_before[0][0]])
    assert score > 0.99  # the new vector, not the saved old one


def test_a_replaced_vector_is_searched_in_the_loaded_index(chat):
    index = chat.held.index
    pages, turns = chat.pages, chat.turns
    index.update("c", pages, turns, lambda p: f"p{p.page_id}")
    signal_index = index.signal("text")
    pages[0].text += " and a new volcano"
    index.update("c", pages[:1], turns, lambda p: f"p{p.page_id}")
    assert index.signal("text").index.ntotal == len(chat.store.embedding_rows("text", vectors=False))
    assert index.signal("text") is signal_index  # refreshed in place, not rebuilt


# -- bad input ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["a\tb", "line\nbreak", "esc\x1b[31m", "", " padded", "rtl\u200fmark"])
def test_conversation_ids_must_be_printable(fake_pager, bad):
    lp = fake_pager()
    with pytest.raises((StoreError, ValueError), match="conversation"):
        lp.conversation(bad, create=True)
    assert lp.conversations() == []


@pytest.mark.parametrize("text", ["lone \ud800 surrogate", "nul \x00 byte"])
def test_unstorable_turn_text_is_a_one_line_error(chat, text):
    before = dump(chat.store.path)
    with pytest.raises(ValueError, match="turn text") as info:
        chat.add_turn("user", text)
    assert "\n" not in str(info.value)
    assert dump(chat.store.path) == before


def test_loaders_name_the_line_of_unstorable_text(tmp_path):
    path = tmp_path / "c.jsonl"
    good = {"id": "ok", "turns": [{"role": "user", "text": "hi"}]}
    bad = {"id": "bad", "turns": [{"role": "user", "text": "x"}]}
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad).replace('"x"', '"\\ud800"') + "\n")
    with pytest.raises(ConversationFileError, match=r"c.jsonl line 2: field 'turns\[0\].text': is not valid Unicode"):
        load_conversations(path)
    path.write_text(json.dumps({**good, "id": "tab\there"}) + "\n")
    with pytest.raises(ConversationFileError, match="line 1: field 'id': conversation id"):
        load_conversations(path)


def test_a_bad_budget_stored_by_an_older_version_names_the_fix(chat):
    store = chat.store
    store.update_settings("c", {**store.settings("c"), "budget": 0})
    before = dump(store.path)
    # a process of its own: ask warms the embedder on a thread, which in this process would outlive the command's
    # environment (no model) and load the real one
    proc = cli_process("ask", "c", "Where is the fence?", store=store.path)
    message = one_line_error(proc)
    assert f"budget c {512}" in message and "stored budget of 0" in message
    assert dump(store.path) == before
    assert cli("pages", "c", store=store.path).returncode == 0  # reading still works
    lp = LocalPager(store.path, backend=ScriptedBackend(reply, model_name="fake.gguf"),
                    options=ModelOptions(embedder=HashEmbedder()))
    conv = lp.conversation("c")
    with pytest.raises(StoreError, match="budget c 512"):
        conv.add_turn("user", "hello")
    conv.set_budget(300)  # the fix
    conv.add_turn("user", "hello")
    assert lp.store.settings("c")["budget"] == 300
    lp.close()


@pytest.mark.parametrize("args", [("lab", "generate", "OUT", "--n", "0"), ("lab", "generate", "OUT", "--n", "-3"),
                                  ("ask", "c", "q", "--budget", "0"), ("ask", "c", "q", "--budget", "-3"),
                                  ("lab", "simulate", "OUT", "--k", "0"), ("bench", "--turns", "0"),
                                  ("budget", "c", "0")])
def test_zero_and_negative_counts_are_refused_before_anything_is_stored(chat, tmp_path, args):
    before = dump(chat.store.path)
    out = tmp_path / "out.jsonl"
    proc = cli(*[str(out) if a == "OUT" else a for a in args], store=chat.store.path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "Invalid value" in proc.stderr
    assert not out.exists() and dump(chat.store.path) == before


def test_a_missing_optional_dependency_names_the_extra():
    from localpager.cli import friendly_errors

    for module, extra in (("matplotlib", "eval"), ("httpx", "http"), ("fastapi", "server"), ("sqlcipher3", "encrypt")):
        with pytest.raises(click.ClickException, match=rf"pip install 'localpager\[{extra}\]'"):
            with friendly_errors():
                raise ModuleNotFoundError(f"No module named {module!r}", name=module)


# -- bad stores ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [("conversations",), ("pages", "c"), ("bookmarks", "c"), ("log", "c")])
def test_read_only_commands_never_create_a_store(tmp_path, command):
    path = tmp_path / "typo.db"
    assert str(path) in one_line_error(cli(*command, store=path))
    assert not path.exists() and list(tmp_path.iterdir()) == []


def test_a_file_that_is_not_sqlite_is_a_one_line_error_and_left_alone(tmp_path):
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 100)
    for command in (("conversations",), ("ask", "c", "hello?")):
        assert "not a database" in one_line_error(cli(*command, store=path))
    assert path.read_bytes() == b"these are my notes, not a database\n" * 100
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_a_read_only_store_reads_and_refuses_writes_in_one_line(chat, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from localpager.cli import cli as command

    path = tmp_path / "ro" / "store.db"
    path.parent.mkdir()
    chat.store.close()
    with sqlite3.connect(chat.store.path) as src, sqlite3.connect(path) as dst:
        src.backup(dst)
    os.chmod(path, 0o444)
    real_access = os.access
    # the permission check as a non-root user sees it (root may write anything)
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) in (path, path.parent) and mode & os.W_OK
                        else real_access(p, mode, **kw))
    before = dump(path, immutable=True)
    runner = CliRunner()
    listing = runner.invoke(command, ["--store", str(path), "conversations"])
    assert listing.exit_code == 0 and listing.output.startswith("c\t"), listing.output
    assert runner.invoke(command, ["--store", str(path), "pages", "c"]).exit_code == 0
    for args in (("pin", "c", "1"), ("ask", "c", "Where is the fence?")):
        result = runner.invoke(command, ["--store", str(path), *args])
        assert result.exit_code == 1 and "read-only" in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1
    assert sorted(p.name for p in path.parent.iterdir()) == ["store.db"]  # no -wal/-shm, no lock files
    assert dump(path, immutable=True) == before


FULL_DISK = r"""
import resource, signal, sys
sys.path[:0] = [sys.argv[2]]
from fakes import ScriptedBackend
from localpager.memory.api import LocalPager
from localpager.store.base import StoreError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing us
lp = LocalPager(sys.argv[1], backend=ScriptedBackend(fallback="ok", model_name="fake.gguf"))
chat = lp.conversation("c")
chat.add_turn("user", "warm-up")
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
stored = 0
try:
    for i in range(2000):
        chat.add_turn("user", f"turn {i} " + "x" * 2000)
        stored += 1
        print(f"ACK {i}", flush=True)
except StoreError as exc:
    print("ERROR", str(exc).splitlines()[0], flush=True)
"""


def test_a_full_disk_is_a_one_line_error_and_every_acknowledged_turn_is_kept(chat):
    path = chat.store.path
    chat.store.close()
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, str(path), str(TESTS)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-1].startswith("ERROR cannot write store") and "disk" in lines[-1], lines[-3:]
    acked = [int(line.split()[1]) for line in lines if line.startswith("ACK")]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    texts = [t.text for t in SQLiteStore(path).turns("c")]
    for i in acked:
        assert texts.count(f"turn {i} " + "x" * 2000) == 1
    assert len(texts) == 12 + 1 + len(acked)  # the refused turn is not there, half or whole


def test_a_truncated_gguf_is_a_one_line_error_and_nothing_is_stored(tmp_path):
    from localpager.core.modelpaths import chat_model_path

    try:
        real = Path(chat_model_path(None))
    except Exception:  # noqa: BLE001
        pytest.skip("no default model file to truncate")
    bad = tmp_path / "cut.gguf"
    with open(real, "rb") as f:
        bad.write_bytes(f.read(1_000_000))
    data = tmp_path / "c.jsonl"
    data.write_text(json.dumps({"id": "c", "turns": [{"role": "user", "text": "hello"}]}) + "\n")
    store = tmp_path / "s.db"
    message = one_line_error(cli_process("ingest", data, store=store, env={"LOCALPAGER_MODEL": str(bad)}))
    assert "cut.gguf" in message or "model" in message.lower()
    if store.exists():
        assert SQLiteStore(store).list_conversations() == []


def test_a_closed_store_says_so_in_one_line(tmp_path):
    from localpager.store.base import StoreError
    from localpager.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "s.db")
    store.create_conversation("c")
    store.close()
    with pytest.raises(StoreError, match="is closed"):
        store.turns("c")
    with pytest.raises(StoreError, match="is closed"):
        with store.transaction():
            pass


# -- stopping ------------------------------------------------------------------------------------------------
def test_serve_stopped_by_sigterm_closes_its_store(tmp_path):
    """A service manager stops ``serve`` with SIGTERM. uvicorn shuts down gracefully, then raises the signal
    again; the store must still be closed as on Ctrl-C (its write-ahead log checkpointed and removed, the KV
    cache and deferred FAISS indexes saved), not left as a killed process leaves it."""
    import signal

    path = tmp_path / "s.db"
    SQLiteStore(path).close()
    with serving(path, "--no-preload", preloaded=False) as served:
        assert Path(f"{path}-wal").exists()  # the store is open
        served.proc.send_signal(signal.SIGTERM)
        served.proc.wait(60)
        served.reader.join(10)
    proc, err = served.proc, "".join(served.lines)
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err
    assert not Path(f"{path}-wal").exists()  # closed: the log was checkpointed into the store and removed
