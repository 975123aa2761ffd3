"""What the recall across a user's conversations reads of the shared FAISS index: each conversation's turn places,
kept as vectors are added (appended, never worked out again) and worked out for all of them in one pass after a
removal; the best cosine of each conversation in one pass; a resident turn's cosine from its vector."""

from __future__ import annotations

import numpy as np
import pytest

from localpager.lab.synthetic import generate_conversation
from localpager.retrieval.index import SignalIndex


def _chats(lp, names=(("a", 1), ("b", 2), ("c", 3)), n_turns=80):
    chats = {}
    for name, seed in names:
        chats[name] = lp.conversation(name, create=True)
        for t in generate_conversation(seed, n_turns=n_turns).turns:
            chats[name].add_turn(t.role, t.text, stamp=False)
        chats[name].prepare()
    return chats


def _worked_out_afresh(index: SignalIndex, conv_id: str):
    index.moved += 1  # as a removal leaves them: every conversation's places to work out again
    return index.conversation_turns(conv_id)


def test_places_appended_as_vectors_are_added_equal_the_places_worked_out_afresh(fake_pager):
    lp = fake_pager()
    chats = _chats(lp)
    index = lp.index.signal("turn")
    before = {name: len(index.conversation_turns(name)[0]) for name in chats}  # known before the growth
    chats["b"].add_turn("user", "A brand new turn about sailing boats.")
    for n in range(30):
        chats["b"].add_turn("assistant" if n % 2 else "user", f"More about the harbour, part {n}.")
    chats["b"].prepare()
    new = _chats(lp, (("d", 4),))["d"]  # a conversation the index had no rows of: known to have none, then these
    assert len(new.pager.evicted)
    grown = [a.copy() for a in index.conversation_turns("b")]
    added = [a.copy() for a in index.conversation_turns("d")]
    others = index.conversation_turns("a")
    assert len(grown[0]) > before["b"] and len(added[0])  # the growth reached the index, appended to what was known
    for kept, again in zip(grown, _worked_out_afresh(index, "b")):
        assert np.array_equal(kept, again)
    for kept, again in zip(added, index.conversation_turns("d")):
        assert np.array_equal(kept, again)
    assert np.array_equal(others[0], index.conversation_turns("a")[0])


def test_best_cosines_in_one_pass_are_each_conversations_best(fake_pager):
    lp = fake_pager()
    chats = _chats(lp)
    vector = lp.index.embedder.encode_one("what did I say about the budget?")
    best = lp.index.best_turn_cosines(["a", "b", "c", "nobody"], vector)
    assert set(best) == {"a", "b", "c"}  # one without vectors has no best
    for name in chats:
        _, cosines = lp.index.all_turn_cosines(name, vector)
        assert best[name] == pytest.approx(float(cosines.max()), abs=1e-6)
    chats["a"].forget(turn=chats["a"].pager.evicted[0].first_turn)  # a removal: every place worked out again
    lp.index.signal("turn").moved += 1  # as a removal leaves them: all to work out again, in one pass
    after = lp.index.best_turn_cosines(["a", "b", "c"], vector)
    assert after["b"] == pytest.approx(best["b"], abs=1e-6) and after["c"] == pytest.approx(best["c"], abs=1e-6)
    _, cosines = lp.index.all_turn_cosines("a", vector)
    assert after["a"] == pytest.approx(float(cosines.max()), abs=1e-6)


def test_a_resident_turn_with_a_vector_scores_its_cosine(fake_pager):
    lp = fake_pager()
    chat = _chats(lp, (("a", 1),))["a"]
    pager = chat.pager
    index = lp.index
    resident = [p for p in pager.pages if not p.evicted]
    assert resident
    index.update("a", resident, pager.turns, pager.bookmark)  # every turn embedded (a user's other conversation)
    wanted = np.array([i for p in resident for i in p.turn_range if pager.turns[i].text] + [10_000])
    where, cosines = index.embedded_turn_cosines("a", "the budget", wanted)
    assert wanted[where].tolist() == wanted[:-1].tolist()  # a turn without a vector is left out
    direct = index.embedder.encode(["the budget", *(pager.turns[i].text for i in wanted[:-1])])
    assert np.allclose(cosines, direct[1:] @ direct[0], atol=1e-5)


def test_a_bm25_index_of_256_turns_or_more_is_saved_once_built_and_read_by_a_new_process(tmp_path):
    """A user's earlier chats, ranked by a new chat to recall from: a new process reads their postings instead of
    tokenising every turn again (written once when built from the first turn; then every ``SAVE_AFTER``)."""
    from localpager.retrieval.ranking import LexicalIndex, LexiconFile

    turns = generate_conversation(5, n_turns=300).turns
    file = tmp_path / "s.db.lexical-1.npz"
    built = LexicalIndex("c", file=LexiconFile(file))
    first = built.scores("what is my budget?", range(300), turns)
    assert file.is_file() and built._saved == 300
    again = LexicalIndex("c", file=LexiconFile(file))
    assert again._read(turns) is not None
    assert again.scores("what is my budget?", range(300), turns) == first
    short = tmp_path / "short.lexical-1.npz"
    LexicalIndex("c", file=LexiconFile(short)).scores("budget", range(100), turns[:100])
    assert not short.exists()  # a short conversation is tokenised again sooner than a file is worth


def test_a_big_history_is_embedded_a_share_per_answer_newest_first(fake_pager, monkeypatch):
    """A user who imported thousands of turns: the first answer in a new chat embeds at most
    ``USER_EMBED_PER_ANSWER`` turns of their other conversations, a page at a time, the newest first, instead of
    every turn (2 min 10 s for 4,440 turns on two cores); the next answers embed the rest. Only a conversation
    embedded whole is recalled from (ranking one would embed the rest of its turns at once)."""
    import localpager.memory.conversation as conversation
    from fakes import ScriptedBackend, answering

    lp = fake_pager(backend=ScriptedBackend(fallback=answering("Noted.")))
    for name, seed in (("old", 1), ("mid", 2), ("new", 3)):  # created in this order: "new" is the newest
        chat = lp.conversation(name, create=True, user="alice")
        for t in generate_conversation(seed, n_turns=60).turns:
            chat.add_turn(t.role, t.text, stamp=False)
    monkeypatch.setattr(conversation, "USER_EMBED_PER_ANSWER", 30)  # a conversation of 60 lacks more: by page
    embedded = lambda name: sum(lp.store.embedded_turn_counts(name, lp.index.embedder.name).values())  # noqa: E731
    today = lp.conversation("today", create=True, user="alice")
    today.ask("What did I say about the budget?")
    assert [embedded(n) for n in ("new", "mid", "old")] == [40, 0, 0]  # pages of 20, until past the 30
    assert set(lp.held.user_embedded) == set()  # none whole: none recalled from yet
    today.ask("And the trip?")
    assert [embedded(n) for n in ("new", "mid", "old")] == [60, 20, 0]
    assert set(lp.held.user_embedded) == {"new"}
    today.ask("Anything else?")
    assert [embedded(n) for n in ("new", "mid", "old")] == [60, 60, 0] and set(lp.held.user_embedded) == {"new", "mid"}


def test_a_conversation_begun_is_finished_when_it_lacks_no_more_than_the_share(fake_pager, monkeypatch):
    """Conversations of a few dozen turns (most chats) are embedded whole once begun, so that the one begun last is
    searched at once rather than at the next question."""
    import localpager.memory.conversation as conversation
    from fakes import ScriptedBackend, answering

    lp = fake_pager(backend=ScriptedBackend(fallback=answering("Noted.")))
    for name, seed in (("old", 1), ("new", 3)):
        chat = lp.conversation(name, create=True, user="alice")
        for t in generate_conversation(seed, n_turns=60).turns:
            chat.add_turn(t.role, t.text, stamp=False)
    monkeypatch.setattr(conversation, "USER_EMBED_PER_ANSWER", 70)
    lp.conversation("today", create=True, user="alice").ask("What did I say about the budget?")
    assert set(lp.held.user_embedded) == {"new", "old"}  # 60, then all 60 of the second though past the 70
