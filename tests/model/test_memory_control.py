"""Memory the user controls, on the real store, real FAISS files and the real embedder (no chat model: the
backend is scripted, nothing here generates): forgetting erases the bytes, search and export/import round
trips use the real ranking, an encrypted store holds no plaintext."""

from __future__ import annotations

import pytest
from fakes import ScriptedBackend
from faultkit import leaks

from localpager.core.pager import PagingConfig
from localpager.store.base import StoreError
from localpager.store.sqlite import SQLiteStore

pytestmark = pytest.mark.embedder

MARKER = "Quillonfrazzle"
PAGING = PagingConfig(boundary="fixed_5", budget=80)
CHATTER = ["How was your weekend?", "It was quiet, I read a novel.", "Any plans for the summer?",
           "Maybe a trip to the coast.", "The weather has been odd lately.", "Yes, rain every afternoon."]


@pytest.fixture(scope="module")
def embedder():
    from localpager.retrieval.embedder import default_embedder

    return default_embedder()


def conversation(lp, conv_id: str, fact: str):
    conv = lp.conversation(conv_id, create=True, config=PAGING)
    for i in range(24):
        text = fact if i == 6 else f"{CHATTER[i % len(CHATTER)]} ({conv_id} {i})"
        conv.add_turn("user" if i % 2 == 0 else "assistant", text)
    return conv


def files_holding(store: SQLiteStore, needle: str) -> list[str]:
    """Every file the store owns that holds ``needle``: database, -wal, -shm, indexes, locks, and saved KV
    caches, whose tokens no grep sees (tests/faultkit.py ``leaks``: undecodable here, so any counts)."""
    return leaks(store.path, needle)


def test_forget_leaves_no_byte_of_the_text_and_never_touches_another_conversation(fake_pager, embedder, tmp_path):
    lp = fake_pager(path=tmp_path / "real.db", embedder=embedder)
    mine = conversation(lp, "mine", f"My bank PIN hint is {MARKER}, keep it safe.")
    other = conversation(lp, "other", "My sister's birthday is on the ninth of March.")
    assert mine.search("what is my bank PIN hint?", 1)[0].turn == 6  # vectors embedded, FAISS files written
    lp.store.add_trace("mine", 22, {"turn": 22, "question": f"is it {MARKER}?", "bookmarks": [], "answer": MARKER})
    other_before = ([h.to_dict() for h in other.search("when is my sister's birthday?")], lp.store.turns("other"))
    assert files_holding(lp.store, MARKER)
    assert {f.name for f in lp.store.owned_files()} >= {"real.db", "real.db.turn.faiss"}

    report = mine.forget(match=MARKER)
    assert report.turns == [6] and report.traces == 1 and report.erased
    assert files_holding(lp.store, MARKER) == []
    assert (tmp_path / "real.db-wal").stat().st_size == 0  # checkpointed and truncated
    assert all(h.turn != 6 for h in mine.search("what is my bank PIN hint?"))
    other = lp.conversation("other")
    assert ([h.to_dict() for h in other.search("when is my sister's birthday?")], lp.store.turns("other")) == other_before

    lp.forget_conversation("other")
    assert files_holding(lp.store, "ninth of March") == []
    assert lp.store.turns("mine")[6].text == "" and len(lp.store.turns("mine")) == 24


def test_search_and_export_import_round_trip_on_the_real_ranking(fake_pager, embedder, tmp_path):
    lp = fake_pager(path=tmp_path / "a.db", embedder=embedder)
    conv = conversation(lp, "c", "We adopted a greyhound called Biscuit last spring.")
    conv.correct(6, "Biscuit is actually a whippet, not a greyhound.")
    hits = conv.search("what kind of dog do we have?", 3)
    assert {h.turn for h in hits[:2]} == {6, 24}
    assert next(h for h in hits if h.turn == 6).label == "changed"
    lp.export(tmp_path / "e.jsonl", vectors=True)
    copy = fake_pager(path=tmp_path / "b.db", embedder=embedder)
    copy.import_file(tmp_path / "e.jsonl")
    again = copy.conversation("c")
    assert again.bookmarks() == conv.bookmarks()
    assert [h.to_dict() for h in again.search("what kind of dog do we have?", 3)] == [h.to_dict() for h in hits]


def test_encrypted_store_keeps_no_plaintext_or_vectors_on_disk(fake_pager, embedder, tmp_path):
    path = tmp_path / "enc.db"
    lp = fake_pager(path=path, embedder=embedder, key="a long passphrase")
    conv = conversation(lp, "c", f"The alarm code is {MARKER}.")
    assert conv.search("what is the alarm code?", 1)[0].turn == 6
    lp.close()
    assert [f.name for f in tmp_path.iterdir() if f.suffix in (".faiss", ".json", ".tmp")] == []
    assert not [f for f in tmp_path.rglob("*") if f.is_file() and MARKER.encode() in f.read_bytes()]
    with pytest.raises(StoreError, match="encrypted"):
        SQLiteStore(path)
    reopened = fake_pager(path=path, embedder=embedder, key="a long passphrase").conversation("c")
    assert reopened.search("what is the alarm code?", 1)[0].turn == 6
    assert isinstance(reopened.held.models.backend, ScriptedBackend)
