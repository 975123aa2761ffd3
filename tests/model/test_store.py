"""Stores written by a LocalPager that counts tokens with the GGUF tokenizer: a killed LoCoMo ingest leaves only
whole conversations, a pinned page stays resident across a reopen (the store itself: tests/fast/test_store.py)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from helpers import LOCOMO, needs_locomo

from localpager.store.sqlite import SQLiteStore


INGEST = """
import sys
from localpager.memory.api import LocalPager
LocalPager(sys.argv[1]).ingest(sys.argv[2])
"""


@pytest.mark.model  # LocalPager without a backend counts tokens with the GGUF tokenizer
@needs_locomo
def test_killed_ingest_leaves_no_partial_conversation(tmp_path):
    """SIGKILL while LoCoMo is being ingested: every stored conversation is whole."""
    path = tmp_path / "s.db"
    proc = subprocess.Popen([sys.executable, "-c", INGEST, str(path), str(LOCOMO)])
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if path.exists():
                try:
                    with sqlite3.connect(path) as c:
                        if c.execute("SELECT COUNT(*) FROM conversations").fetchone()[0] >= 2:
                            break
                except sqlite3.Error:
                    pass
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    from localpager.store.loaders import load_conversations

    expected = {c.id: len(c.turns) for c in load_conversations(LOCOMO).conversations}
    with SQLiteStore(path) as s:
        stored = s.list_conversations()
        assert 2 <= len(stored) < 10, "the kill should land mid-ingest"
        for info in stored:
            assert info.turns == expected[info.id]
            pages = s.pages(info.id)
            assert pages[0].first_turn == 0 and pages[-1].last_turn == info.turns - 1


@pytest.mark.model  # LocalPager without a backend counts tokens with the GGUF tokenizer
def test_a_pinned_page_stays_resident_across_reopen(tmp_path):
    from localpager.core.pager import PagingConfig
    from localpager.memory.api import LocalPager

    lp = LocalPager(tmp_path / "s.db")
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", budget=200))
    for i in range(5):
        chat.add_turn("user" if i % 2 == 0 else "assistant", f"remember the blue door number {i}")
    chat.pin(1)
    for i in range(5, 80):
        chat.add_turn("user" if i % 2 == 0 else "assistant", f"small talk about the weather, day {i}")
    assert chat.pager.evicted and not chat.pages[0].evicted
    evicted = [p.evicted for p in chat.pages]
    lp.close()
    reopened = LocalPager(tmp_path / "s.db").conversation("c")
    assert reopened.pages[0].pinned and not reopened.pages[0].evicted
    assert [p.evicted for p in reopened.pages] == evicted
