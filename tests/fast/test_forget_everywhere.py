"""A forget is final everywhere: another LocalPager (another process, or an app's second instance) holding
the conversation drops what it holds instead of saving it back, and a forget that could not rewrite the
files says so and is finished by the next one. On the fakes, with a backend that saves KV caches in
llama.cpp's layout (tests/faultkit.py), a real store and real FAISS files."""

from __future__ import annotations

import json
import sqlite3
import threading

import pytest
from click.testing import CliRunner
from fakes import HashEmbedder
from faultkit import StatefulBackend, decode_fake, kv_tokens, leaks, run_forget_across, store_files

from localpager.cli import cli
from localpager.core.pager import PagingConfig
from localpager.memory.api import LocalPager, ModelOptions
from localpager.store.locks import FileLock, LockTimeout

SECRET = "Quillonfrazzle"
SMALL = PagingConfig(boundary="fixed_5", budget=60)


def reply(prompt: str, grammar: str | None) -> str:
    from fakes import shortest_sentence

    return shortest_sentence(grammar) if grammar else "Noted, thanks."


@pytest.fixture
def pagers(tmp_path):
    """A factory of LocalPagers on one store, each with a backend that saves its KV cache: two of them
    stand for two processes (the second holds the conversation, the first forgets)."""
    opened = []

    def make():
        lp = LocalPager(tmp_path / "s.db", backend=StatefulBackend(reply, model_name="fake.gguf"),
                        options=ModelOptions(embedder=HashEmbedder()))
        opened.append(lp)
        return lp

    yield make
    for lp in opened:
        lp.close()


def say_secret(lp: LocalPager, conv_id: str = "c"):
    """A conversation whose 8th turn holds the secret, asked about (so the live KV cache holds it) and
    searched (so the pager, BM25 and FAISS caches do)."""
    chat = lp.conversation(conv_id, create=True, config=SMALL)
    for i in range(30):
        text = f"Turn {i} is about topic{i // 5} with zebra{i}." + (f" My code word is {SECRET}." if i == 7 else "")
        chat.add_turn("user" if i % 2 == 0 else "assistant", text)
    chat.ask(f"Is {SECRET} still my code word?")  # a recall: answered on the side context
    assert SECRET in lp.side_backend.detokenize(lp.side_backend.cached_tokens())
    chat.ask(f"Say {SECRET} back to me.", mode="never")  # in the chat's own prompt
    assert SECRET in lp.backend.detokenize(lp.backend.cached_tokens())
    chat.search(SECRET)
    return chat


def kv_texts(store_path) -> list[str]:
    return [decode_fake(kv_tokens(p)) for p in store_files(store_path) if ".kv-" in p.name and kv_tokens(p)]


# -- the erase generation ------------------------------------------------------------------------------
def test_a_pager_holding_the_conversation_never_saves_it_back_after_a_forget(pagers, tmp_path):
    holder, forgetter = pagers(), pagers()
    held = say_secret(holder)
    holder.conversation("other", create=True, config=SMALL).ask("What is a good name for a cat?")
    assert any(SECRET in text for text in kv_texts(tmp_path / "s.db"))  # the switch saved the held cache
    held.ask("And what else did I say?")  # loaded back: the live cache holds the secret again
    assert forgetter.store.erase_generation() == 0

    report = forgetter.conversation("c").forget(match=SECRET)
    assert report.turns == [7, 30, 32] and report.rewritten and not report.rewrite_pending  # the fact, the questions
    assert forgetter.store.erase_generation() == 1 and not kv_texts(tmp_path / "s.db")

    holder.conversation("other").ask("And a name for a dog?")  # the model moves: nothing of "c" is saved
    holder.close()
    assert leaks(tmp_path / "s.db", SECRET, decode_fake) == []
    texts = kv_texts(tmp_path / "s.db")
    assert len(texts) == 1 and "a name for a dog" in texts[0]  # the check reads the caches that are there
    assert all(p.name.endswith("-e1") for p in store_files(tmp_path / "s.db") if ".kv-" in p.name)


def test_closing_a_pager_that_holds_forgotten_text_saves_nothing(pagers, tmp_path):
    holder, forgetter = pagers(), pagers()
    say_secret(holder)
    forgetter.forget_conversation("c")
    holder.close()
    assert leaks(tmp_path / "s.db", SECRET, decode_fake) == [] and kv_texts(tmp_path / "s.db") == []
    assert holder.backend.cached_tokens() == []  # dropped, not kept


def test_a_held_pager_and_its_indexes_never_serve_forgotten_text(pagers):
    holder, forgetter = pagers(), pagers()
    held = say_secret(holder)
    assert next(h for h in held.search(SECRET) if h.turn == 7).lexical > 0
    forgetter.conversation("c").forget(match=SECRET)

    assert held.turns[7].text == ""  # the loaded pager was dropped and read again
    assert all(h.lexical == 0 for h in held.search(SECRET) if h.turn == 7)  # no stale BM25 index
    assert holder.prefix_states.generation == holder.store.erase_generation() == 1
    assert held.ask("What is my code word?").answer  # and it carries on
    assert SECRET not in holder.backend.detokenize(holder.backend.cached_tokens())
    side = holder.side_backend
    assert SECRET not in side.detokenize(side.cached_tokens())


def test_a_saved_cache_of_an_older_generation_is_never_loaded(pagers, tmp_path):
    holder = pagers()
    say_secret(holder)
    holder.close()
    saved, = [p for p in store_files(tmp_path / "s.db") if ".kv-" in p.name]
    stale = saved.read_bytes()
    forgetter = pagers()
    forgetter.conversation("c").forget(match=SECRET)
    saved.write_bytes(stale)  # as if written between the forget's commit and its deletion of the files
    fresh = pagers()
    assert fresh.prefix_states.switch_to("c", fresh.backend) == 0
    assert fresh.prefix_states.path("c", fresh.backend) != saved
    assert SECRET not in fresh.backend.detokenize(fresh.backend.cached_tokens())


def test_a_forget_committed_between_the_check_and_the_write_saves_nothing(pagers, monkeypatch):
    """The save reads the generation again under the lock the forgetting process deletes the files under."""
    holder = pagers()
    say_secret(holder)
    states = holder.prefix_states
    answers = iter([0, 1])  # unchanged at the first look, moved on under the lock
    monkeypatch.setattr(states, "_erasures", lambda: next(answers))
    assert states.save(holder.backend) is False
    assert holder.backend.cached_tokens() == [] and not list(states.store_path.parent.glob("s.db.kv-*"))


def test_forget_across_two_processes_leaves_nothing(tmp_path):
    for whole in (False, True):
        run = run_forget_across(tmp_path / f"p{whole}.db", SECRET, whole=whole)
        assert any(found.endswith("(KV tokens)") for found in run.before)  # the check sees a held cache
        assert not any(SECRET.encode() in p.read_bytes() for p in store_files(tmp_path / f"p{whole}.db")
                       if ".kv-" in p.name)  # ...which a grep never would
        assert run.after == []


# -- forget again finishes the rewrite -----------------------------------------------------------------
@pytest.fixture(autouse=True)
def short_waits(monkeypatch):
    """A forget waits for readers as long as any write waits (10 s); here a reader never finishes."""
    monkeypatch.setattr("localpager.store.sqlite.BUSY_TIMEOUT_MS", 300)


def hold_a_reader(path) -> sqlite3.Connection:
    """Another connection in the middle of a read: its snapshot keeps the WAL from being checkpointed."""
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM turns").fetchall()
    return reader


def _cli(store, *args, input=None):
    return CliRunner().invoke(cli, ["--store", str(store), *args], input=input, catch_exceptions=False)


def test_a_forget_that_could_not_rewrite_says_so_and_forget_again_finishes_it(pagers, tmp_path):
    path = tmp_path / "s.db"
    say_secret(pagers())
    reader = hold_a_reader(path)

    result = _cli(path, "forget", "c", "--match", SECRET)
    assert result.exit_code == 1, result.output
    assert "could not be rewritten" in result.output and "forget c --finish" in result.output
    assert "exports written before this forget" in result.output
    lp = pagers()
    assert lp.store.erase_pending() and lp.store.turns("c")[7].text == ""

    again = _cli(path, "forget", "c", "--match", SECRET)  # still held open: still not done, still said
    assert again.exit_code == 1 and "forgot 0 turns" in again.output and "could not be rewritten" in again.output
    reader.close()
    again = _cli(path, "forget", "c", "--match", SECRET, "--json")  # nothing new matches: it finishes the rewrite
    report = json.loads(again.output)
    assert again.exit_code == 0 and report["turns"] == [] and report["rewritten"] and not report["rewrite_pending"]
    assert not lp.store.erase_pending()
    assert leaks(path, SECRET, decode_fake) == []


def test_finish_and_the_library_report(pagers, tmp_path):
    path = tmp_path / "s.db"
    chat = say_secret(pagers())
    reader = hold_a_reader(path)
    report = chat.forget(match=SECRET)
    assert report.turns == [7, 30, 32] and not report.rewritten and report.rewrite_pending and not report.erased
    assert report.note.startswith("exports written before this forget still hold")
    assert chat.held.finish_erase() is False and chat.store.erase_pending()
    reader.close()
    result = _cli(path, "forget", "c", "--finish")
    assert result.exit_code == 0 and result.output.startswith("rewrote the store's files")
    assert not chat.store.erase_pending() and leaks(path, SECRET, decode_fake) == []
    assert _cli(path, "forget", "c", "--finish", "--turn", "1").exit_code == 2
    assert chat.forget(match="zebra3", dry_run=True).erased is False  # a dry run never says erased


def test_forgetting_a_whole_conversation_again_finishes_its_rewrite(pagers, tmp_path):
    path = tmp_path / "s.db"
    lp = pagers()
    say_secret(lp)
    reader = hold_a_reader(path)
    assert _cli(path, "forget", "c", "--yes").exit_code == 1
    reader.close()
    result = _cli(path, "forget", "c", "--yes")
    assert result.exit_code == 0 and "finished the pending rewrite" in result.output
    assert leaks(path, SECRET, decode_fake) == []
    assert "no conversation 'c'" in _cli(path, "forget", "c", "--yes").output  # nothing pending: the usual error


# -- lock files, exports -------------------------------------------------------------------------------
def test_forgetting_a_whole_conversation_removes_its_lock_file(pagers, tmp_path):
    lp = pagers()
    chat = say_secret(lp)
    lock = chat._lock.path
    assert lock.exists()
    lp.forget_conversation("c")
    assert not lock.exists()
    assert lp.conversation("c", create=True).add_turn("user", "a new start").index == 0  # the id is free again


def test_a_waiter_on_a_removed_lock_file_locks_the_new_one(tmp_path):
    """Removing a lock file while others wait on it must not let two holders in at once."""
    path = tmp_path / "locks" / "x.lock"
    first, waiter, third = (FileLock(path, 5) for _ in range(3))
    first.acquire()
    got, done = threading.Event(), threading.Event()

    def wait_then_hold():
        waiter.acquire()
        got.set()
        done.wait(5)
        waiter.release()

    thread = threading.Thread(target=wait_then_hold)
    thread.start()
    time_to_wait = threading.Event()
    time_to_wait.wait(0.2)  # the waiter has opened the old file and polls its lock
    first.remove()
    first.release()
    assert got.wait(5) and path.exists()
    with pytest.raises(LockTimeout):  # the waiter holds the file that is there now: nobody else gets in
        third.acquire(0.2)
    done.set()
    thread.join(5)
    third.acquire(1)
    third.release()


def test_import_replace_says_it_brings_forgotten_text_back(pagers, tmp_path):
    path = tmp_path / "s.db"
    lp = pagers()
    say_secret(lp)
    lp.export(tmp_path / "before.jsonl")
    lp.conversation("c").forget(turn=7)
    result = _cli(path, "import", str(tmp_path / "before.jsonl"), "--replace")
    assert result.exit_code == 0 and "brings back 1 turns that were forgotten (turns 7)" in result.output
    assert len([line for line in result.output.splitlines() if "forgotten" in line]) == 1
    result = _cli(path, "import", str(tmp_path / "before.jsonl"), "--replace")  # nothing forgotten now
    assert "forgotten" not in result.output


# -- the server ----------------------------------------------------------------------------------------
def test_a_served_conversation_forgotten_elsewhere_starts_afresh_and_forget_says_exports_keep_it(pagers):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from localpager.serving.app import create_app

    served, other = pagers(), pagers()

    def chat(client, text):
        return client.post("/v1/chat/completions", headers={"X-Conversation-Id": "c"},
                           json={"model": "localpager", "messages": [{"role": "user", "content": text}]})

    with TestClient(create_app(served, log=lambda line: None)) as client:
        assert chat(client, f"My code word is {SECRET}.").status_code == 200
        other.forget_conversation("c")  # another process forgets it whole
        again = chat(client, "Hello again.")
        assert again.status_code == 200, again.text
        assert [t.text for t in other.store.turns("c")][0] == "Hello again."  # a new conversation, nothing of the old
        body = client.post("/v1/conversations/c/forget", json={"match": "Hello"}).json()
        assert body["turns"] == [0] and body["rewritten"] and body["note"].startswith("exports written before")
