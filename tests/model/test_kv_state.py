"""A conversation's KV cache saved beside the store and resumed by the next process (localpager.store.kvstate),
on the real model: what it saves, that the answer is the one a full read gives, and that a stale or
unreadable state is never used."""

from __future__ import annotations

import shutil
import stat

import pytest

from localpager.core.pager import PagingConfig
from localpager.lab.synthetic import generate_conversation
from localpager.memory.api import LocalPager

pytestmark = [pytest.mark.model, pytest.mark.slow]

QUESTION = "Thanks! Can you say that more briefly?"


def kv_files(store):
    return sorted(p for p in store.parent.iterdir() if ".kv-" in p.name and not p.name.endswith(".tmp"))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A store with a 70-turn conversation whose chat prompt was read once and saved on close, and the answer a
    new process gives on a full read of it (built once: each test works on its own copy)."""
    store = tmp_path_factory.mktemp("saved") / "s.db"
    lp = LocalPager(store)
    chat = lp.conversation("c", create=True, config=PagingConfig(budget=1024))
    for turn in generate_conversation(2, n_turns=70).turns:
        chat.add_turn(turn.role, turn.text)
    # the question the tests ask: its answer may then be this one word for word without being generated again
    # (an answer that repeats a reply to another question is, and a second pass reuses the first's prompt)
    chat.ask(QUESTION, mode="never")
    lp.close()
    scratch = tmp_path_factory.mktemp("full") / "saved"
    shutil.copytree(store.parent, scratch)
    return store, ask_in_new_process(scratch / store.name, resume=False)


@pytest.fixture
def stored(saved, tmp_path):
    """This test's copy of the saved store (the database and its saved cache)."""
    source, _ = saved
    copy = tmp_path / "saved"
    shutil.copytree(source.parent, copy)
    return copy / source.name


@pytest.fixture
def full(saved):
    """The answer a new process gives on a full read of the stored conversation."""
    return saved[1]


def ask_in_new_process(store, *, resume=True, **options):
    """A fresh LocalPager and model, as a new process would have."""
    lp = LocalPager(store)
    lp.prefix_states.enabled = resume
    answer = lp.conversation("c").ask(QUESTION, mode="never", remember=False, **options)
    lp.close()
    return answer


def test_a_new_process_resumes_the_saved_cache_and_answers_as_a_full_read_would(stored, full):
    files = kv_files(stored)
    assert len(files) == 1 and stat.S_IMODE(files[0].stat().st_mode) == 0o600
    resumed = ask_in_new_process(stored)
    assert full.trace.tokens["reused"] == 0 and full.trace.tokens["prompt"] > 300
    assert resumed.trace.tokens["reused"] > 0.8 * resumed.trace.tokens["prompt"]
    assert resumed.trace.tokens["evaluated"] < 0.2 * full.trace.tokens["evaluated"]
    assert resumed.answer == full.answer


def test_a_state_that_does_not_match_the_prompt_is_used_only_as_far_as_it_matches(stored, full):
    """Another conversation's cache under this one's name (the worst stale state): only the shared system
    text is taken from it, and the answer is the one a full read gives."""
    lp = LocalPager(stored)
    other = lp.conversation("d", create=True, config=PagingConfig(budget=1024))
    for turn in generate_conversation(5, n_turns=70).turns:
        other.add_turn(turn.role, turn.text)
    other.ask("Okay, let's move on.", mode="never")
    system = len(lp.backend.render([lp.runtime.messages(lp.conversation("c").pager, None)[0]],
                                   add_generation_prompt=False))
    lp.close()
    mine, theirs = (lp.prefix_states.path(c, lp.backend) for c in ("c", "d"))
    theirs.replace(mine)
    lp.prefix_states.sum_path(theirs).replace(lp.prefix_states.sum_path(mine))  # a sound file: its checksum too
    resumed = ask_in_new_process(stored)
    assert 0 < resumed.trace.tokens["reused"] <= system
    assert resumed.answer == full.answer


def test_an_unreadable_state_is_dropped_and_the_answer_is_unchanged(stored, full, caplog):
    kv_files(stored)[0].write_bytes(b"not a llama.cpp state")
    resumed = ask_in_new_process(stored)
    assert resumed.trace.tokens["reused"] == 0 and resumed.answer == full.answer
    assert "deleted a saved model state" in caplog.text


@pytest.mark.parametrize("where", ["after the header", "in the middle"])
def test_a_damaged_state_never_reaches_llama_cpp(stored, full, caplog, where):
    """Issue 32, item 2: 2,000 bytes changed in a saved cache (past the header, so that llama.cpp's own checks
    may not see it: it aborted the process 3 times of 3, again at every restart). Its checksum no longer
    matches: it is deleted with one warning line before llama.cpp reads it, and the answer is a full read's."""
    import struct

    path, = kv_files(stored)
    data = bytearray(path.read_bytes())
    _, _, n_tokens = struct.unpack_from("<III", data)
    start = 12 + 4 * n_tokens + 16 if where == "after the header" else len(data) // 2
    for i in range(start, start + 2000):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    with caplog.at_level("WARNING"):
        resumed = ask_in_new_process(stored)
    assert resumed.trace.tokens["reused"] == 0 and resumed.answer == full.answer
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= 30]
    assert len(warnings) == 1 and "does not match its checksum" in warnings[0], warnings
