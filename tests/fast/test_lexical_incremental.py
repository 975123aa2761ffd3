"""The BM25 index appended to as a conversation grows scores as bm25s does over the same turns, and the
ranking's per-turn table and arrays give the same ranking as scoring every candidate one by one."""

from __future__ import annotations

import numpy as np
import pytest

from localpager.core.records import Page, Turn
from localpager.core.text import content_words
from localpager.lab.fusion import Bm25, fusion_settings
from localpager.lab.synthetic import generate_conversation
from localpager.retrieval.ranking import (
    HybridSettings,
    LexicalIndex,
    LexiconFile,
    Ranking,
    answer_priors,
    question_turn_weights,
    rank_turns,
)
from tests.helpers import pages_of, speaker_turns


def reference(index: LexicalIndex, question: str, turns) -> dict[int, float]:
    """bm25s over every turn, built from scratch (what the index did before it was appended to)."""
    bm25 = Bm25([index.document(t) for t in turns], index.k1, index.b)
    query = list(dict.fromkeys(content_words(question, index.stemmer)))
    weight = sum(bm25.idf(t) for t in query)
    raw = bm25.scores(query)
    return {i: (float(raw[i]) / weight if weight > 0 else 0.0) for i in range(len(turns))}


def test_appending_scores_as_bm25s_from_scratch():
    conv = generate_conversation(3, n_turns=300)
    questions = [p.question for p in conv.probes] + ["budget nuts schedule", "quantum chromodynamics"]
    index = LexicalIndex("c")
    for n in (1, 2, 40, 41, 300):
        turns = conv.turns[:n]
        for q in questions:
            assert index.scores(q, range(n), turns) == reference(index, q, turns)
    assert index._grown.n == 300


def test_a_changed_turn_or_fewer_turns_index_again_from_the_first():
    turns = speaker_turns([("A", "the garden fence needs paint"), ("B", "blue would suit it")])
    index = LexicalIndex("c")
    index.scores("fence", [0, 1], turns)
    first = index._grown
    changed = [turns[0], Turn("assistant", "red would suit it", 1, speaker="B")]
    assert index.scores("red", [0, 1], changed) == reference(index, "red", changed)
    assert index._grown is not first
    assert index.scores("fence", [0], changed[:1]) == reference(index, "fence", changed[:1])


def test_forgotten_turns_are_no_candidates_and_count_as_empty_documents():
    turns = speaker_turns([("A", "the fence needs paint"), ("B", "the fence is blue"), ("A", "paint it red")])
    turns[1] = Turn("assistant", "", 1, speaker="B")
    index = LexicalIndex("c")
    hits = rank_turns("fence paint", turns, pages_of(turns, 2), lambda q, idx: dict.fromkeys(idx, 0.5), index)
    assert [h.turn for h in hits] == [0, 2]
    assert index.scores("fence", [0, 2], turns) == {i: s for i, s in reference(index, "fence", turns).items() if i != 1}


def one_by_one(question, turns, pages, dense, lexical, settings):
    """The ranking as it was computed before the table: a dict of candidates, priors turn by turn."""
    owner = {i: p.page_id for p in pages for i in p.turn_range if i < len(turns) and turns[i].text}
    candidates = sorted(owner)
    d, lx = dense(question, candidates), lexical.scores(question, candidates, turns)
    dv, lv = np.array([d.get(i, 0.0) for i in candidates]), np.array([lx.get(i, 0.0) for i in candidates])
    fused = (settings.fuse(dv, lv) * question_turn_weights(turns, candidates, settings)
             * answer_priors(question, turns, candidates, settings))
    order = sorted(range(len(candidates)), key=lambda j: (-fused[j], candidates[j]))
    return [(candidates[j], owner[candidates[j]], float(fused[j]), float(dv[j]), float(lv[j])) for j in order]


@pytest.mark.parametrize("fusion", ["product", "weighted", "rrf", "dense", "lexical"])
def test_the_table_ranks_as_scoring_turn_by_turn(fusion):
    conv = generate_conversation(5, n_turns=200)
    turns = [Turn(t.role, t.text, t.index, speaker=("Ana" if t.role == "user" else None)) for t in conv.turns]
    pages = pages_of(turns, 7)[:-1] + [Page(99, 196, 199)]
    rng = np.random.default_rng(0)
    cosines = dict(enumerate(rng.uniform(-0.2, 0.9, len(turns)).tolist()))
    dense = lambda q, idx: {i: cosines[i] for i in idx}
    settings = HybridSettings() if fusion == "product" else fusion_settings(fusion)  # the lab's: lab.fusion
    index = LexicalIndex("c")
    for q in [p.question for p in conv.probes] + ["What did Ana say about money?", "hello"]:
        hits = rank_turns(q, turns, pages, dense, index, settings)
        assert isinstance(hits, Ranking)
        assert [(h.turn, h.page_id, h.score, h.dense, h.lexical) for h in hits] == \
            one_by_one(q, turns, pages, dense, index, settings)
        assert hits[:3] == list(hits)[:3] and hits[-1] == list(hits)[-1]


def test_a_partial_order_reads_as_the_whole_one(monkeypatch):
    conv = generate_conversation(6, n_turns=240)
    turns, pages = conv.turns, pages_of(conv.turns, 5)
    cosines = dict(enumerate(np.random.default_rng(1).uniform(0, 1, len(turns)).round(2).tolist()))  # ties
    dense = lambda q, idx: {i: cosines[i] for i in idx}
    question = conv.probes[0].question
    whole = list(rank_turns(question, turns, pages, dense, LexicalIndex("c")))
    monkeypatch.setattr(Ranking, "PREFIX", 8)
    hits = rank_turns(question, turns, pages, dense, LexicalIndex("c"))
    assert hits[0] == whole[0] and hits[:8] == whole[:8] and not hits._whole
    assert hits.best_pages(3, also=[whole[-1].page_id]) == \
        [h for h in _best_per_page(whole) if h in _best_per_page(whole)[:3] or h.page_id == whole[-1].page_id]
    assert hits.rank_of(whole[-1].turn) == len(whole) - 1 and hits[-1] == whole[-1]
    assert list(hits) == whole and hits.best_per_page() == _best_per_page(whole)


def _best_per_page(hits):
    seen = {}
    for h in hits:
        seen.setdefault(h.page_id, h)
    return list(seen.values())


def test_the_gate_sees_the_same_features_from_the_arrays(fake_pager):
    from localpager.retrieval.gate import gate_features

    lp = fake_pager()
    chat = lp.conversation("c", create=True)
    for t in generate_conversation(8, n_turns=120).turns:
        chat.add_turn(t.role, t.text, stamp=False)
    selector = lp.selector("c")
    for question in ("What am I allergic to?", "Did Lisbon come up?", "hello there"):
        hits = selector.rank(question, chat.pager)
        fast = selector._gate_features(question, hits, chat.pager)
        slow = gate_features(question, list(hits), chat.pager.turns)
        assert fast.vector() == pytest.approx(slow.vector(), rel=1e-12, abs=1e-12)


def test_a_saved_index_is_read_back_by_a_new_process_and_dropped_after_an_erase(fake_pager, monkeypatch, tmp_path):
    from localpager.retrieval import lexfile

    monkeypatch.setattr(LexicalIndex, "SAVE_AFTER", 50)
    store = tmp_path / "s.db"
    lp = fake_pager(path=store)
    chat = lp.conversation("c", create=True)
    for t in generate_conversation(9, n_turns=120).turns:
        chat.add_turn(t.role, t.text, stamp=False)
    question = "What am I allergic to?"
    first = lp.lexical("c").scores(question, range(120), chat.pager.turns)
    saved = lexfile.path_for(store, "c")
    assert saved.is_file() and saved in lp.store.owned_files()
    again = fake_pager(path=store).lexical("c")  # a new process: reads the file, appends nothing
    turns = fake_pager(path=store).conversation("c").pager.turns
    assert again.scores(question, range(120), turns) == first
    tells = again._table.array("tells").tolist()
    assert again._saved == 120 and tells == lp.lexical("c")._table.array("tells").tolist()
    chat.forget(turn=3)
    assert not saved.exists()  # it held the forgotten words


def test_a_saved_index_of_other_turns_is_not_used(tmp_path, monkeypatch):
    from localpager.retrieval import lexfile

    monkeypatch.setattr(LexicalIndex, "SAVE_AFTER", 10)
    turns = generate_conversation(2, n_turns=60).turns
    file = tmp_path / "x.lexical-1.npz"
    LexicalIndex("c", file=LexiconFile(file)).scores("budget", range(60), turns)
    assert file.is_file()
    other = [Turn(t.role, t.text + " more", t.index) for t in turns]
    index = LexicalIndex("c", file=LexiconFile(file))
    assert index.scores("budget", range(60), other) == reference(index, "budget", other)
    assert index._read(other) is not None  # rewritten for the new turns
    assert lexfile.load(file, {**index._stamp(), "erasures": 1}, other, object, object) is None
