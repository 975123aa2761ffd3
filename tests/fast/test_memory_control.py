"""Memory the user controls (forget, correct, search, export/import, encryption, file permissions) on the
fakes: a scripted backend and a hashing embedder, a real store and real FAISS files."""

from __future__ import annotations

import json
import sqlite3
import stat

import pytest
from click.testing import CliRunner
from faultkit import leaks

from localpager.cli import cli
from localpager.core.pager import PagingConfig
from localpager.lab.selectors import lab_selector
from localpager.retrieval.rerank import RerankSettings
from localpager.runtime.prompts import CHANGED, LATEST
from localpager.store.location import open_store
from localpager.store.base import StoreError
from localpager.store.sqlite import SQLiteStore

pytestmark = pytest.mark.both_stores  # the tests that take a store run on SQLite and on PostgreSQL
MARKER = "Zorblaxquintessa"
SMALL = PagingConfig(boundary="fixed_5", budget=60)


def fill(chat, n: int, marker_at: int | None = None, start: int = 0) -> None:
    for i in range(start, start + n):
        text = f"Turn {i} is about topic{i // 5} with zebra{i} and number {i}."
        if i == marker_at:
            text += f" My locker code word is {MARKER}."
        chat.add_turn("user" if i % 2 == 0 else "assistant", text)


def raw_hits(store: SQLiteStore, needle: str) -> list[str]:
    """Files of the store that hold ``needle``: as UTF-8 bytes, or in a saved KV cache's tokens (tests/faultkit.py);
    on PostgreSQL, the files under the database's ``base/`` folder (tests/postgres_cluster.py)."""
    if store.kind == "postgresql":
        from postgres_cluster import database_leaks

        return database_leaks(store, needle)
    return leaks(store.path, needle)


def trace(turn: int, question: str, bookmarks: list[str], cited: list[int] = ()) -> dict:
    return {"turn": turn, "question": question, "bookmarks": bookmarks, "answer": "ok", "injected_turns": list(cited),
            "citations": [{"turn": t, "page_id": 1, "text": "", "speaker": "user"} for t in cited]}


@pytest.fixture
def lp(fake_pager):
    return fake_pager()


@pytest.fixture
def chat(lp):
    conv = lp.conversation("c", create=True, config=SMALL)
    fill(conv, 30, marker_at=7)
    return conv


# -- forget ------------------------------------------------------------------------------------------
def test_forget_match_removes_text_vectors_bookmark_and_traces_and_leaves_no_bytes(chat, lp):
    store = chat.store
    assert chat.search(MARKER, 1)[0].turn == 7  # embeds the evicted pages: vectors and FAISS files exist
    from localpager.retrieval.choices import Signal

    pager = chat.pager  # and the whole-page and bookmark vectors a measurement signal would embed
    lp.index.update("c", pager.evicted, pager.turns, pager.bookmark, Signal)
    page = chat.pager.page_of_turn(7)
    assert MARKER in page.keywords
    old_mark = chat.pager.bookmark(page)
    store.add_trace("c", 29, trace(29, f"what is {MARKER}?", [old_mark]))
    store.add_trace("c", 27, trace(27, "unrelated", [old_mark, "[p9:x]"]))
    store.add_trace("c", 25, trace(25, "cites it", [], cited=[7]))
    assert raw_hits(store, MARKER)

    dry = chat.forget(match=MARKER.lower(), dry_run=True)
    assert dry.turns == [7] and dry.dry_run and "code word is Zorblax" in dry.texts[0]
    assert MARKER in store.turns("c")[7].text and len(store.traces("c")) == 3  # a dry run changes nothing

    report = chat.forget(match=MARKER.lower())
    assert report.turns == [7] and report.pages == [page.page_id] and report.traces == 2
    assert report.traces_scrubbed == 1 and report.vectors >= 3 and report.erased
    assert store.turns("c")[7].text == "" and len(store.turns("c")) == 30  # indices do not move
    kept = store.traces("c")
    assert [t["question"] for t in kept] == ["unrelated"]
    new_mark = chat.pager.bookmark(chat.pager.page_of_turn(7))
    assert kept[0]["bookmarks"] == [new_mark, "[p9:x]"] and MARKER not in new_mark
    assert not [r for r in store.embedding_rows("turn", "c", vectors=False) if r[3] == "turn:7"]
    assert all(h.turn != 7 for h in chat.search(MARKER, 30))
    assert raw_hits(store, MARKER) == []
    index = lp.index.signal("turn")
    assert index.index.ntotal == len(store.embedding_rows("turn", vectors=False))


def test_forget_turn_and_page_and_errors(chat):
    with pytest.raises(ValueError, match="exactly one"):
        chat.forget()
    with pytest.raises(ValueError, match="no turn 99"):
        chat.forget(turn=99)
    with pytest.raises(ValueError, match="no page p42"):
        chat.forget(page=42)
    assert chat.forget(turn=3).turns == [3]
    assert chat.forget(turn=3).turns == []  # already forgotten
    report = chat.forget(page=1)
    assert report.turns == [0, 1, 2, 4]
    page = chat.pager.page(1)
    assert page.keywords == [] and chat.pager.bookmark(page) == "[p1]"
    assert all(t.text == "" for t in chat.turns[0:5])


def test_forgotten_turns_stay_out_of_prompt_and_ranking(chat):
    chat.forget(turn=29)
    messages = chat.held.models.runtime.messages(chat.pager, None)
    assert all(m.content.strip() for m in messages)
    chat.add_turn("user", "and a new turn after the forgotten one")  # indices carry on
    assert chat.turns[-1].index == 30


def test_forgetting_one_conversation_never_touches_another(fake_pager):
    lp = fake_pager()
    a = lp.conversation("a", create=True, config=SMALL)
    b = lp.conversation("b", create=True, config=SMALL)
    fill(a, 20, marker_at=4)
    fill(b, 20, marker_at=4)
    lp.store.add_trace("b", 19, trace(19, f"about {MARKER}", []))
    before = (lp.store.turns("b"), [p.__dict__ for p in lp.store.pages("b")], lp.store.traces("b"),
              [h.to_dict() for h in b.search(MARKER)])
    a.search(MARKER)
    vectors_b = [r[2:] for r in lp.store.embedding_rows("turn", "b")]
    assert a.forget(match=MARKER).turns == [4]
    assert lp.forget_conversation("a", dry_run=True).whole and lp.store.has_conversation("a")
    lp.forget_conversation("a")
    assert not lp.store.has_conversation("a")
    b = lp.conversation("b")
    after = (lp.store.turns("b"), [p.__dict__ for p in lp.store.pages("b")], lp.store.traces("b"),
             [h.to_dict() for h in b.search(MARKER)])
    assert after == before
    assert [r[2:] for r in lp.store.embedding_rows("turn", "b")] == vectors_b
    assert MARKER in lp.store.turns("b")[4].text


def test_forget_deletes_probes_whose_evidence_goes(fake_pager, tmp_path):
    from localpager.lab.synthetic import generate_dataset
    from localpager.store.loaders import dump_jsonl

    lp = fake_pager()
    conv = generate_dataset(1, seed=5, n_turns=60)[0]
    dump_jsonl([conv], tmp_path / "c.jsonl")
    lp.ingest(tmp_path / "c.jsonl", config=SMALL)
    evidence = conv.probes[0].evidence[0]
    report = lp.conversation(conv.id).forget(turn=evidence)
    assert report.probes >= 1
    assert all(evidence not in p.evidence for p in lp.store.probes(conv.id))


# -- correct -----------------------------------------------------------------------------------------
def test_correct_marks_superseded_relabels_search_and_rebuilds_the_bookmark(chat, fake_pager, store_location):
    page = chat.pager.page_of_turn(7)
    assert MARKER in page.keywords
    new = chat.correct(7, "My locker code word is Brightwater now.")
    assert new.index == 30 and new.role == chat.turns[7].role
    assert chat.turns[7].superseded_by == 30
    assert MARKER not in chat.pager.page(page.page_id).keywords  # the bookmark shows the current value
    reopened = fake_pager(path=store_location).conversation("c")
    assert reopened.turns[7].superseded_by == 30
    assert MARKER not in reopened.pages[page.page_id - 1].keywords
    hit = next(h for h in chat.search(MARKER) if h.turn == 7)
    assert hit.label == "changed" and hit.superseded_by == 30
    with pytest.raises(ValueError, match="no turn"):
        chat.correct(100, "x")


def _select(conv, question, **settings):
    selector = lab_selector(conv.held.index, conv.id, RerankSettings(**settings), page_choice="rerank")
    return selector.select(question, [], conv.pager, room=10_000)


def test_a_superseded_turn_is_never_injected_alone(chat):
    question = f"{MARKER} zebra7 topic1?"
    injections, _ = _select(chat, question)
    assert injections[0].turns == [7]
    chat.correct(7, "My locker code word is Brightwater now.")
    injections, candidates = _select(chat, question)
    shown = [(t, i.labels.get(t, "")) for i in injections for t in i.turns]
    assert shown[0] == (30, LATEST) and 7 not in [t for t, _ in shown]
    assert any("corrects turn 7" in c.reason for c in candidates if c.injected)
    injections, _ = _select(chat, question, show_changed=True)
    shown = [(t, i.labels.get(t, "")) for i in injections for t in i.turns]
    assert shown[0] == (30, LATEST) and (7, CHANGED) in shown


def test_a_correction_outranks_the_change_cue_rule(fake_pager):
    lp = fake_pager()
    conv = lp.conversation("c", create=True, config=SMALL)
    conv.add_turn("user", "My gym locker number is 118 at the Elm street gym.")
    fill(conv, 20, start=1)
    conv.add_turn("user", "Actually my gym locker number changed to 245 at the Elm street gym.")  # a cue turn
    fill(conv, 10, start=22)
    conv.correct(0, "My gym locker number is 999, the manager fixed it.")
    injections, _ = _select(conv, "What is my gym locker number at the Elm street gym?")
    assert injections[0].turns == [32] and injections[0].labels == {32: LATEST}


def test_supersede_checks_order(chat):
    with pytest.raises(ValueError, match="after the turn"):
        chat.supersede(10, 5)


# -- search ------------------------------------------------------------------------------------------
def test_search_ranks_with_page_time_and_score(fake_pager):
    lp = fake_pager()
    conv = lp.conversation("c", create=True, config=SMALL)
    fill(conv, 25)
    conv.add_turn("user", "The plumber Ottoline comes on Friday.", time="2024-05-01 10:00")
    hits = conv.search("when does the plumber Ottoline come", limit=3)
    assert len(hits) == 3 and hits[0].turn == 25 and hits[0].time == "2024-05-01 10:00"
    assert hits[0].page_id == conv.pager.page_of_turn(25).page_id and hits[0].score >= hits[1].score
    with pytest.raises(ValueError):
        conv.search("  ")
    assert lp.conversation("empty", create=True).search("anything") == []


# -- export / import ---------------------------------------------------------------------------------
def _state(conv):
    return ([(p.page_id, p.first_turn, p.last_turn, p.token_count, p.keywords, p.evicted, p.pinned) for p in conv.pages],
            conv.bookmarks(), [(t.text, t.time, t.speaker, t.superseded_by) for t in conv.turns])


@pytest.mark.parametrize("vectors", [False, True])
def test_export_import_round_trip(chat, lp, fake_pager, tmp_path, vectors):
    chat.pin(6)
    chat.correct(3, "Turn 3 is really about giraffes.")
    chat.forget(turn=11)
    lp.conversation("empty", create=True)
    query = "zebra3 giraffes topic0"
    before = [h.to_dict() for h in chat.search(query)]
    out = tmp_path / "out" / "export.jsonl"
    out.parent.mkdir()
    assert lp.export(out, vectors=vectors) == 2
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert ("vectors" in json.loads(out.read_text().splitlines()[0])["localpager"]) == vectors

    other = fake_pager(path=tmp_path / "other.db")
    report = other.import_file(out)
    assert report.ids == ["c", "empty"]
    copy = other.conversation("c")
    assert _state(copy) == _state(chat)
    assert [h.to_dict() for h in copy.search(query)] == before
    with pytest.raises(ValueError, match="already in the store: c, empty .use --replace or --merge"):
        other.import_file(out)
    assert other.import_file(out, mode="replace").replaced == ["c", "empty"]
    assert _state(other.conversation("c")) == _state(chat)


def test_merge_appends_what_the_store_lacks_and_refuses_divergence(chat, lp, fake_pager, tmp_path):
    out = tmp_path / "e.jsonl"
    other = fake_pager(path=tmp_path / "other.db")
    lp.export(out)
    other.import_file(out)
    fill(chat, 5, start=30)
    lp.export(out)
    report = other.import_file(out, mode="merge")
    assert report.merged == ["c"] and report.turns == 5
    assert [t.text for t in other.conversation("c").turns] == [t.text for t in chat.turns]
    other.store.add_trace("c", 0, {})
    diverged = other.conversation("c")
    diverged.add_turn("user", "something only the other store has")
    chat.add_turn("user", "something only this store has")
    lp.export(out)
    with pytest.raises(ValueError, match="differ at turn 35"):
        other.import_file(out, mode="merge")


def test_an_export_is_also_an_ingestible_file(chat, lp, fake_pager, tmp_path):
    from localpager.store.loaders import load_conversations

    lp.export(tmp_path / "e.jsonl")
    loaded = load_conversations(tmp_path / "e.jsonl")
    assert [t.text for t in loaded.conversations[0].turns] == [t.text for t in chat.turns]


# -- encryption --------------------------------------------------------------------------------------
@pytest.mark.sqlite_only
def test_encrypted_store_has_no_plaintext_and_needs_its_key(fake_pager, tmp_path):
    path = tmp_path / "secret.db"
    lp = fake_pager(path=path, key="correct horse")
    conv = lp.conversation("c", create=True, config=SMALL)
    fill(conv, 30, marker_at=7)
    assert conv.search(MARKER, 1)[0].turn == 7
    assert lp.store.encrypted
    files = lp.store.owned_files()
    assert not [f for f in files if f.name.endswith((".faiss", ".json", ".tmp"))]  # indexes in memory only
    lp.close()
    assert not [f.name for f in files if f.exists() and MARKER.encode() in f.read_bytes()]
    assert b"zebra" not in path.read_bytes()
    snapshot = {f: f.read_bytes() for f in tmp_path.rglob("*") if f.is_file()}
    with pytest.raises(StoreError, match="give its key"):
        SQLiteStore(path)
    with pytest.raises(StoreError, match="wrong key"):
        SQLiteStore(path, key="wrong")
    assert {f: f.read_bytes() for f in tmp_path.rglob("*") if f.is_file()} == snapshot  # a wrong key changes nothing
    again = fake_pager(path=path, key="correct horse").conversation("c")
    assert again.search(MARKER, 1)[0].turn == 7


def test_missing_encrypt_extra_is_one_line(monkeypatch, tmp_path):
    import builtins

    real = builtins.__import__

    def no_sqlcipher(name, *args, **kwargs):
        if name.startswith("sqlcipher3"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sqlcipher)
    with pytest.raises(StoreError, match=r"pip install 'localpager\[encrypt\]'"):
        SQLiteStore(tmp_path / "x.db", key="k")
    assert not (tmp_path / "x.db").exists()


# -- file hygiene ------------------------------------------------------------------------------------
@pytest.mark.sqlite_only
def test_every_file_the_store_creates_is_private(fake_pager, tmp_path):
    folder = tmp_path / "new" / "nested"
    lp = fake_pager(path=folder / "m.db")
    conv = lp.conversation("c", create=True, config=SMALL)
    fill(conv, 30)
    conv.search("zebra")
    conv.forget(turn=2)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(folder.parent.stat().st_mode) == 0o700
    files = [f for f in folder.rglob("*") if f.is_file()]
    assert {f.name for f in files} >= {"m.db", "m.db-wal", "m.db-shm", "m.db.turn.faiss", "m.db.turn.json"}
    assert {f.name: oct(stat.S_IMODE(f.stat().st_mode)) for f in files} == {f.name: "0o600" for f in files}


def test_schema_migration_adds_the_superseded_column(tmp_path):
    from localpager.store.sqlite import MIGRATIONS

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    for script in MIGRATIONS[:4]:
        conn.executescript(script)
    conn.execute("PRAGMA user_version = 4")
    conn.execute("INSERT INTO conversations (id, created_at) VALUES ('c', 0)")
    conn.execute("INSERT INTO turns (conv_id, idx, role, text) VALUES ('c', 0, 'user', 'hi')")
    conn.commit()
    conn.close()
    store = SQLiteStore(path)
    assert store.turns("c")[0].superseded_by is None
    store.close()


# -- the CLI -----------------------------------------------------------------------------------------
def _turns(location, conv_id: str):
    """The turns of ``conv_id`` in the store at ``location`` (None: not there), read and closed again."""
    with open_store(location) as s:
        return s.turns(conv_id) if s.has_conversation(conv_id) else None


def _cli(store, *args, input=None, env=None):
    return CliRunner().invoke(cli, ["--store", str(store), *args], input=input, env=env, catch_exceptions=False)


def test_cli_forget_dry_run_json_and_confirmation(chat, tmp_path):
    path = chat.store.path
    result = _cli(path, "forget", "c", "--match", MARKER, "--dry-run", "--json")
    assert result.exit_code == 0 and json.loads(result.output)["turns"] == [7]
    assert MARKER in _turns(path, "c")[7].text
    result = _cli(path, "forget", "c", "--turn", "1", "--page", "2")
    assert result.exit_code == 2 and "one of" in result.output
    result = _cli(path, "forget", "c", input="n\n")
    assert result.exit_code == 1 and _turns(path, "c") is not None
    result = _cli(path, "forget", "c", "--match", MARKER)
    assert result.exit_code == 0 and result.output.startswith("forgot 1 turns of c")
    result = _cli(path, "forget", "c", "--yes")
    assert result.exit_code == 0 and _turns(path, "c") is None
    result = _cli(path, "forget", "nope", "--yes")
    assert result.exit_code == 1 and "no conversation 'nope'" in result.output


def test_cli_export_import_and_modes(chat, tmp_path):
    path, out = chat.store.path, tmp_path / "e.jsonl"
    assert _cli(path, "export", "c", "--output", str(out)).output.startswith("exported 1 conversations")
    result = _cli(path, "import", str(out))
    assert result.exit_code == 1 and result.output.strip().endswith("(use --replace or --merge)")
    assert len(result.output.strip().splitlines()) == 1
    assert _cli(path, "import", str(out), "--replace").output.startswith("imported 1 conversations")
    assert _cli(path, "import", str(out), "--replace", "--merge").exit_code == 2


@pytest.mark.sqlite_only
def test_cli_key_env(fake_pager, tmp_path):
    path = tmp_path / "enc.db"
    lp = fake_pager(path=path, key="k1")
    lp.conversation("c", create=True)
    lp.close()
    ok = _cli(path, "--key-env", "LP_KEY", "conversations", env={"LP_KEY": "k1"})
    assert ok.exit_code == 0 and ok.output.startswith("c\t")
    for env, message in (({"LP_KEY": "bad"}, "wrong key"), ({}, "LP_KEY is not set")):
        result = _cli(path, "--key-env", "LP_KEY", "conversations", env=env)
        assert result.exit_code == 1 and message in result.output and len(result.output.strip().splitlines()) == 1
    result = _cli(path, "conversations")
    assert result.exit_code == 1 and "--key-env" in result.output


@pytest.mark.sqlite_only
def test_chat_unknown_slash_command_is_not_sent_or_stored(fake_pager, tmp_path, monkeypatch):
    import localpager.cli.answer as answer

    lp = fake_pager(path=tmp_path / "s.db")
    conv = lp.conversation("c", create=True, config=SMALL)
    fill(conv, 30, marker_at=7)
    monkeypatch.setattr(answer, "open_chat", lambda *a, **k: conv)
    result = _cli(tmp_path / "s.db", "chat", "c", input=f"/frobnicate\n/pin 2\n/forget {MARKER}\ny\n"
                                                        f"/export {tmp_path / 'x.jsonl'}\n/quit\n")
    assert "unknown command /frobnicate" in result.output
    assert "p2 pinned" in result.output and "forgot 1 turns" not in result.output  # the summary line only
    assert "deleted" in result.output and (tmp_path / "x.jsonl").exists()
    assert len(lp.store.turns("c")) == 30
    # the model read the chat's memory while it waited (the warm-up: one token, nothing generated), never a command
    assert all(c.max_tokens == 1 and not c.output for c in lp.backend.calls)
    assert not any("frobnicate" in c.text or "/pin" in c.text for c in lp.backend.calls)
    assert lp.store.turns("c")[7].text == ""
