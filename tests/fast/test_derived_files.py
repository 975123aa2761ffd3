"""Every file beside the store is derived from it and can never outlive a forget, crash a process, or let one
conversation break another (issue 32, items 1-3 and the file parts of 6). On the fakes, with real FAISS,
BM25 and KV-cache files (tests/derivedkit.py).

- A large FAISS index whose save is deferred to close is not written back after another process forgot a
  turn of it (two processes, as in the issue).
- A damaged or foreign file (a non-IDMap or HNSW FAISS index, one of another width or with other ids, bytes
  changed, a BM25 file whose rows point past the turns, a KV cache damaged after its header or without its
  checksum) is rebuilt from the store (or dropped, for a KV cache) with one warning; search and answers are
  those of the undamaged store, and a damaged KV cache never reaches the backend.
- A crafted import (the issue's: another id, every vector cut to 8 floats) is refused in one line before
  anything is stored, and the other conversations keep searching and answering.
- ``forget --match`` scrubs the conversation's meta and drops the probes any field of which repeats the text.
"""

from __future__ import annotations

import base64
import json
import logging
import shutil

import derivedkit
import numpy as np
import pytest
from click.testing import CliRunner
from faultkit import StatefulBackend, leaks

from localpager.cli import cli
from localpager.store.loaders import ConversationFileError

SECRET = "Plimquartz"


# -- 1. a deferred FAISS save after another process's forget -------------------------------------------------
@pytest.mark.slow
def test_a_deferred_faiss_save_does_not_bring_back_what_another_process_forgot(tmp_path):
    run = derivedkit.run_write_back(tmp_path / "s.db", SECRET)
    assert run.before, "the check must see the vector before the forget"
    assert run.after == []


def test_an_index_that_is_no_longer_current_is_not_saved(fake_pager, tmp_path, monkeypatch):
    """In one process, as the worker above does it: a forget through another LocalPager moves the erase
    generation, and the first one's deferred save then writes nothing."""
    import localpager.retrieval.index as index

    monkeypatch.setattr(index, "SAVE_NOW_BELOW", 10)
    store = tmp_path / "s.db"
    holder = fake_pager(path=store)
    chat = holder.conversation("c", create=True, config=derivedkit.config())
    for i in range(40):
        chat.add_turn("user", derivedkit.SECRET_TEXT.format(secret=SECRET) if i == 3 else derivedkit.filler(i))
    chat.search("zebra7")
    for i in range(40, 60):
        chat.add_turn("user", derivedkit.filler(i))
    chat.search("zebra7")
    assert holder.held.index.signal("turn").dirty
    fake_pager(path=store).conversation("c").forget(match=SECRET)
    saved = (tmp_path / "s.db.turn.faiss").read_bytes()
    holder.close()
    assert (tmp_path / "s.db.turn.faiss").read_bytes() == saved
    assert derivedkit.vector_leaks(store, derivedkit.SECRET_TEXT.format(secret=SECRET)) == []


def test_a_bm25_file_is_not_written_back_after_another_process_forgot(fake_pager, tmp_path, monkeypatch):
    """A process that read the turns before another one's forget, and indexes them before it checks the
    erase generation again, must not save a BM25 file of them: its postings hold the forgotten word (as
    UTF-32: a grep for the word never sees it), under the new generation's stamp."""
    from localpager.retrieval.ranking import LexicalIndex

    monkeypatch.setattr(LexicalIndex, "SAVE_AFTER", 50)
    store = tmp_path / "s.db"
    holder = fake_pager(path=store)
    chat = holder.conversation("c", create=True, config=derivedkit.config())
    for i in range(120):
        chat.add_turn("user", derivedkit.SECRET_TEXT.format(secret=SECRET) if i == 3 else derivedkit.filler(i))
    turns, lexical = list(chat.pager.turns), holder.lexical("c")  # read before the forget
    fake_pager(path=store).conversation("c").forget(match=SECRET)
    lexical.scores("where is the zebra7?", range(len(turns)), turns)  # its next question, before it checks
    assert not list(tmp_path.glob("s.db.lexical-*"))
    assert derivedkit.word_leaks(store, SECRET) == []


# -- 2. damaged and foreign files ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A store with every kind of file beside it, and what search and ask give on it (``open_and_use``)."""
    store = tmp_path_factory.mktemp("pristine") / "s.db"
    derivedkit.make_store(store)
    copy = tmp_path_factory.mktemp("clean") / "s.db"
    shutil.copytree(store.parent, copy.parent, dirs_exist_ok=True)
    return store, use(copy)


def use(store, calls=None):
    """Search and ask as ``derivedkit.open_and_use`` does, in this process; ``calls``: the KV files the
    backend is asked to load are appended to it."""
    from localpager.retrieval.ranking import LexicalIndex

    before, LexicalIndex.SAVE_AFTER = LexicalIndex.SAVE_AFTER, 50
    load = StatefulBackend.load_state

    def spy(self, path):
        if calls is not None:
            calls.append(path.name)
        return load(self, path)

    StatefulBackend.load_state = spy
    try:
        lp = derivedkit.pager(store, states=True)
        chat = lp.conversation(derivedkit.CONV)
        hits = [(h.turn, round(h.score, 4)) for h in chat.search("where is the zebra7 in the garden?", 5)]
        answer = chat.ask("What did I say about the zebra7?", remember=False)
        lp.close()
        return hits, answer.answer
    finally:
        LexicalIndex.SAVE_AFTER = before
        StatefulBackend.load_state = load


@pytest.mark.parametrize("case", list(derivedkit.DAMAGES))
def test_a_damaged_or_foreign_file_is_rebuilt_with_one_warning(case, pristine, tmp_path, caplog):
    store, expected = pristine
    shutil.copytree(store.parent, tmp_path / "s", dirs_exist_ok=True)
    damaged = tmp_path / "s" / store.name
    derivedkit.DAMAGES[case](damaged)
    kv = derivedkit.kv_file(damaged).name
    calls: list[str] = []
    with caplog.at_level(logging.WARNING):
        assert use(damaged, calls) == expected
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "\n" not in warnings[0].getMessage()
    if case.startswith("kv"):
        assert calls == [] and not (damaged.parent / kv).exists()  # never handed to the model, and gone
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # what replaced it is sound: the next process says nothing
        assert use(damaged)[0] == expected[0]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


# -- 3. a crafted import -------------------------------------------------------------------------------------
def test_the_issues_crafted_import_is_refused_and_other_conversations_keep_working(tmp_path):
    result = derivedkit.crafted_import(tmp_path)
    assert result.refused and "\n" not in result.message, result.message
    assert "localpager.vectors[0].vector" in result.message and "holds 8 numbers" in result.message
    assert result.broken == []
    lp = derivedkit.pager(tmp_path / "s.db")
    assert [c.id for c in lp.conversations()] == ["a", "b"]
    lp.close()


def test_the_crafted_import_on_the_command_line_is_one_line(tmp_path, fake_models):
    derivedkit.crafted_import(tmp_path)
    store, crafted = tmp_path / "s.db", tmp_path / "crafted.jsonl"
    result = CliRunner().invoke(cli, ["--store", str(store), "import", str(crafted)], catch_exceptions=False)
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1, result.output
    assert "holds 8 numbers; this store's embedder (hash-64) makes 64" in result.output
    search = CliRunner().invoke(cli, ["--store", str(store), "search", "b", "zebra7"], catch_exceptions=False)
    assert search.exit_code == 0 and "zebra7" in search.output


def crafted(tmp_path, change) -> tuple:
    """A store with conversation ``a`` searched; its export renamed ``evil`` and changed by ``change(line)``."""
    store = tmp_path / "s.db"
    lp = derivedkit.pager(store)
    chat = lp.conversation("a", create=True, config=derivedkit.config())
    for i in range(30):
        chat.add_turn("user", derivedkit.filler(i))
    chat.search("zebra3")
    lp.close()
    out = tmp_path / "e.jsonl"
    lp = derivedkit.pager(store)
    lp.export(out, ["a"], vectors=True)
    line = json.loads(out.read_text())
    line["id"] = "evil"
    change(line)
    out.write_text(json.dumps(line) + "\n")
    return lp, out


def vectors_of(line) -> list[dict]:
    return line["localpager"]["vectors"]


def b64(values) -> str:
    return base64.b64encode(np.asarray(values, dtype=np.float32).tobytes()).decode()


@pytest.mark.parametrize("change, field, message", [
    (lambda line: vectors_of(line)[1].update(vector=b64(np.full(64, np.nan))), "localpager.vectors[1].vector",
     "not finite"),
    (lambda line: vectors_of(line)[1].update(vector=b64(np.full(64, 3.0))), "localpager.vectors[1].vector",
     "unit vector"),
    (lambda line: vectors_of(line).append(dict(vectors_of(line)[0])), "kind", "a second vector for"),
])
def test_vectors_that_would_rank_wrongly_are_refused(tmp_path, change, field, message):
    lp, path = crafted(tmp_path, change)
    try:
        with pytest.raises(ConversationFileError) as caught:
            lp.import_file(path)
        assert field in str(caught.value) and message in str(caught.value)
        assert [c.id for c in lp.conversations()] == ["a"]
    finally:
        lp.close()


def test_another_models_vectors_are_left_out_with_a_note(tmp_path):
    def other_model(line):
        for row in vectors_of(line):
            row.update(model="another-embedder", vector=b64(np.full(8, 1 / np.sqrt(8))))

    lp, path = crafted(tmp_path, other_model)
    try:
        report = lp.import_file(path)
        assert report.ids == ["evil"]
        assert any("vectors of model another-embedder were not imported" in n for n in report.notes)
        assert not [r for r in lp.store.conversation_embeddings("evil") if r[2] == "another-embedder"]
        assert lp.conversation("evil").search("zebra3") and lp.conversation("a").search("zebra3")
    finally:
        lp.close()


# -- 6. forget --match scrubs the conversation's meta and every field of its probes --------------------------
def test_forget_match_scrubs_meta_and_probe_fields(fake_pager, tmp_path):
    line = {
        "id": "m",
        "turns": [{"role": "user", "text": f"My locker code is {SECRET}."}]
                 + [{"role": "user", "text": derivedkit.filler(i)} for i in range(1, 20)],
        "meta": {"title": f"Talk about {SECRET.lower()}", "keep": "nothing secret", f"{SECRET} key": 1,
                 "nested": {"notes": ["fine", f"the {SECRET} note"]}},
        "probes": [{"question": "What is in the garden?", "answer": "zebra", "evidence": [5],
                    "adversarial_answer": f"the code is {SECRET}"},
                   {"question": "What is turn 2 about?", "answer": "zebra2", "evidence": [2]}],
    }
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(line) + "\n")
    lp = fake_pager(path=tmp_path / "s.db")
    lp.ingest(path, config=derivedkit.config())
    report = lp.conversation("m").forget(match=SECRET)
    assert report.turns == [0] and report.probes == 1 and report.meta_scrubbed == 3
    assert lp.store.conversation_record("m")["meta"] == {"title": "[forgotten]", "keep": "nothing secret",
                                                          "nested": {"notes": ["fine", "[forgotten]"]}}
    assert [p.question for p in lp.store.probes("m")] == ["What is turn 2 about?"]
    lp.export(tmp_path / "after.jsonl")
    assert SECRET.lower() not in (tmp_path / "after.jsonl").read_text().lower()
    assert leaks(tmp_path / "s.db", SECRET) == []
