"""What a question reads of the stored vectors: a new process checks which pages are embedded with one count
per page, and a question after that reads no rows for the pages it knows (on SQLite and on PostgreSQL)."""

from __future__ import annotations

import pytest

from localpager.lab.synthetic import generate_conversation
from localpager.retrieval.index import PageIndex
from tests.fakes import HashEmbedder

pytestmark = pytest.mark.both_stores


def test_turn_vector_counts_per_page(store):
    store.create_conversation("c")
    store.save_embeddings([("c", 1, "turn:0", "m", "a", b"\0" * 16), ("c", 1, "turn:1", "m", "b", b"\0" * 16),
                           ("c", 2, "turn:2", "other", "c", b"\0" * 16), ("c", 2, "text", "m", "c", b"\0" * 16)])
    assert store.embedded_turn_counts("c", "m") == {1: 2}
    assert store.embedded_turn_counts("c", "other") == {2: 1}
    assert store.embedded_turn_counts("nobody", "m") == {}


def test_a_new_process_embeds_only_what_is_missing(fake_pager, store_location):
    lp = fake_pager(path=store_location)
    chat = lp.conversation("c", create=True)
    for t in generate_conversation(4, n_turns=200).turns:
        chat.add_turn(t.role, t.text, stamp=False)
    assert chat.prepare() > 0
    embedder = HashEmbedder()
    again = fake_pager(path=store_location, embedder=embedder)
    later = again.conversation("c")
    assert later.prepare() == 0 and embedder.encoded == 0  # counted as embedded: nothing recomputed
    later.forget(turn=later.pager.evicted[0].first_turn)  # its vector goes: the count still matches
    fresh = PageIndex(again.store, embedder)
    pager = later.pager
    assert fresh.update("c", pager.evicted, pager.turns, pager.bookmark) == 0
    assert fresh.turn_scores("c", "budget", [p.page_id for p in pager.evicted])


def test_embedding_keys_are_the_rows_without_texts(store):
    store.create_conversation("c")
    store.save_embeddings([("c", 1, "turn:0", "m", "a", b"\0" * 16), ("c", 1, "text", "m", "b", b"\0" * 16)])
    assert store.embedding_keys("turn") == [r[:4] for r in store.embedding_rows("turn", vectors=False)]
    assert [k[3] for k in store.embedding_keys("text")] == ["text"]


def test_a_conversation_growing_leaves_the_others_turn_places_as_worked_out(fake_pager, store_location):
    """A user's new chat embeds its turns: the places of their other conversations' turns in the index (what the
    recall across their conversations scores) are not worked out again; after a forget (a removal moves places)
    they still point at the right vectors."""
    lp = fake_pager(path=store_location)
    chats = {}
    for name, seed in (("a", 1), ("b", 2)):
        chats[name] = lp.conversation(name, create=True)
        for t in generate_conversation(seed, n_turns=120).turns:
            chats[name].add_turn(t.role, t.text, stamp=False)
        chats[name].prepare()
    index = lp.index.signal("turn", None if lp.store.local else "a")
    if not lp.store.local:
        pytest.skip("a database server's store keeps one index per conversation")
    before = index.conversation_turns("a")
    chats["b"].add_turn("user", "A brand new turn about sailing boats.")
    chats["b"].add_turn("assistant", "Sounds fun.")
    chats["b"].prepare()
    assert index.conversation_turns("a")[0] is before[0]  # not worked out again
    vector = lp.index.embedder.encode_one("budget")
    turns, cosines = lp.index.all_turn_cosines("a", vector)
    chats["b"].forget(turn=chats["b"].pager.evicted[0].first_turn)  # its vector removed: places move
    turns2, cosines2 = lp.index.all_turn_cosines("a", vector)
    assert sorted(zip(turns.tolist(), cosines.round(5).tolist())) == sorted(zip(turns2.tolist(),
                                                                                cosines2.round(5).tolist()))
