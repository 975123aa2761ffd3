"""A new process loads the chat model on a background thread while it reads its memory (``LocalPager.preload``):
the model and its side context are adopted when first used, and an unused preload is not saved on close."""

from __future__ import annotations

import pytest

from localpager import LocalPager

pytestmark = [pytest.mark.model, pytest.mark.embedder]


def test_a_preloaded_model_is_the_one_used(tmp_path):
    lp = LocalPager(tmp_path / "s.db")
    lp.preload()
    lp.preload()  # once is enough: a second call starts nothing
    backend = lp.backend
    assert lp._preloading is None and backend is lp.backend
    assert lp.side_backend is not backend and lp.counter().count("hello there") > 0
    lp.close()


def test_an_unused_preload_leaves_no_saved_state(tmp_path):
    lp = LocalPager(tmp_path / "s.db")
    lp.preload()
    lp.close()
    assert lp._backend is None and not list(tmp_path.glob("s.db.kv-*"))


def test_a_warmed_chat_reads_only_its_question(tmp_path):
    from localpager.lab.synthetic import generate_conversation

    lp = LocalPager(tmp_path / "s.db")
    chat = lp.conversation("c", create=True)
    for t in generate_conversation(2, n_turns=60).turns[:40]:
        chat.add_turn(t.role, t.text, stamp=False)
    chat.warm_up(models=True)
    assert chat.warmed(300)
    trace = chat.ask("Okay, let's move on.", mode="never").trace
    assert trace.tokens["reused"] > 0.8 * trace.tokens["prompt"]  # the memory was read while it waited
    lp.close()
