"""Issue 32 (4): matching a request's history with the stored conversation is about linear in both, and runs
before the model lock, so a long history costs its own request's time only. On the fakes (tests/fakes.py)."""

from __future__ import annotations

import json
import random
import threading

import pytest
from fakes import ScriptedBackend, shortest_sentence

from localpager.serving.protocol import Msg, reconcile

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from localpager.serving.app import create_app  # noqa: E402

ANSWER = "Noted, thanks for telling me."


def brute_overlap(stored: list[Msg], client: list[Msg]) -> int:
    """The rule as it reads: the largest j whose client turns are the store's last j (a forgotten turn, no text,
    being any turn of its role)."""
    for j in range(min(len(stored), len(client)), 0, -1):
        if all(s.key == c.key or (s.role == c.role and not s.key[1]) for s, c in zip(stored[-j:], client[:j])):
            return j
    return 0


def alternating(texts) -> list[Msg]:
    return [Msg("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)]


def test_the_overlap_is_the_rule_s_on_histories_built_to_repeat():
    from localpager.serving.protocol import longest_overlap

    rng = random.Random(32)
    roles = ("user", "assistant")
    for _ in range(2000):
        alphabet = rng.choice([["x"], ["x", "y"], ["x", "y", ""], ["x ", " x", "y"]])
        stored = [Msg(rng.choice(roles), rng.choice(alphabet)) for _ in range(rng.randint(1, 25))]
        if rng.random() < 0.5:  # most likely an overlap: the store's tail (forgotten turns shown as the client kept
            k = rng.randint(0, len(stored))  # them), then new turns
            client = [Msg(m.role, m.text or "what the client still shows") for m in stored[len(stored) - k:]]
            client += [Msg(rng.choice(roles), rng.choice(["x", "y", "z"])) for _ in range(rng.randint(0, 4))]
        else:
            client = [Msg(rng.choice(roles), rng.choice(["x", "y", "  x"])) for _ in range(rng.randint(1, 25))]
        if client:
            assert longest_overlap(stored, client) == brute_overlap(stored, client), (stored, client)


def test_the_782_kb_history_of_the_issue_is_matched_with_about_linear_work():
    """24,000 one-word turns stored; a history of 16,000 "x", one "y" and 7,000 "x": 82 s before (every overlap
    tried from the longest, each compared turn by turn: some 190 million comparisons)."""
    import localpager.serving.protocol as protocol

    stored = alternating(["x"] * 23_999 + ["ok"])
    history = alternating(["x"] * 16_000 + ["y"] + ["x"] * 6_999)
    compared = []
    real = protocol._same
    protocol._same = lambda a, b: compared.append(1) or real(a, b)
    try:
        result = reconcile(stored, history)
        assert result.status == "diverged" and len(compared) <= 4 * (len(stored) + len(history))
        compared.clear()
        result = reconcile(stored[:-1], history)  # the same store without its last turn: the first 16,000 overlap
        assert len(compared) <= 4 * (len(stored) + len(history))
    finally:
        protocol._same = real
    assert (result.status, result.matched, len(result.new)) == ("appended", 15_999, 7_001)


@pytest.fixture
def lp(fake_pager):
    return fake_pager(backend=ScriptedBackend(fallback=lambda p, g: shortest_sentence(g) if g else ANSWER))


def big_store(lp, tmp_path, turns: int):
    """Conversation "big": ``turns`` one-word turns, the last the assistant's "ok"."""
    path = tmp_path / "big.jsonl"
    texts = ["x"] * (turns - 1) + ["ok"]
    path.write_text(json.dumps({"id": "big", "turns": [{"role": m.role, "text": m.text}
                                                       for m in alternating(texts)]}) + "\n")
    lp.ingest(path)


def chat(client, conv: str, messages: list[Msg]):
    body = {"model": "localpager", "messages": [{"role": m.role, "content": m.text} for m in messages]}
    return client.post("/v1/chat/completions", json=body, headers={"X-Conversation-Id": conv})


def test_a_long_history_that_cannot_be_matched_is_answered_at_once_and_stores_nothing(lp, tmp_path, monkeypatch):
    """Matching compares about as many turns as the two histories hold (trying every overlap turn by turn
    compared some 18 million here and took about 8 s); the time is benchmarks/serve_cases.py's to measure."""
    import localpager.serving.protocol as protocol

    big_store(lp, tmp_path, 6_000)
    request = alternating(["x"] * 4_000 + ["y"] + ["x"] * 2_000)  # its last "x" is the question
    compared = []
    real = protocol._same
    monkeypatch.setattr(protocol, "_same", lambda a, b: compared.append(1) or real(a, b))
    with TestClient(create_app(lp, log=lambda line: None, max_body_bytes=4_000_000)) as client:
        assert chat(client, "big", alternating(["warm up"])).status_code == 200  # the conversation is open
        before, compared[:] = len(lp.store.turns("big")), []
        r = chat(client, "big", request)
    assert r.status_code == 200 and r.headers["x-localpager-history"] == "diverged"
    assert len(lp.store.turns("big")) == before + 2  # the question and its answer; nothing of the history
    assert len(compared) <= 4 * (before + len(request)), f"{len(compared):,} turn comparisons"


def test_the_history_is_matched_before_the_model_lock(lp, monkeypatch):
    """While another conversation's answer holds the model lock, a request's history is already being matched;
    before, the matching itself waited for the lock (and held it: every conversation waited behind it)."""
    import localpager.serving.jobs as jobs

    matching = threading.Event()
    real = jobs.reconcile

    def watched(stored, client):
        matching.set()
        return real(stored, client)

    monkeypatch.setattr(jobs, "reconcile", watched)
    with TestClient(create_app(lp, log=lambda line: None)) as client:
        done = []
        with lp.lock:  # another conversation's answer, being generated
            worker = threading.Thread(target=lambda: done.append(
                chat(client, "other", alternating(["Hello.", "Hi!", "What's new?"]))))
            worker.start()
            assert matching.wait(10), "the history was not matched while the model lock was held"
            assert not done  # the answer itself waits for the model
        worker.join(30)
    assert done and done[0].status_code == 200 and done[0].headers["x-localpager-history"] == "appended"


def test_a_write_between_the_match_and_the_lock_is_matched_again(lp, monkeypatch):
    """The match is read from the store before the model lock; if the conversation changed meanwhile (another
    process appended), it is matched again under the lock, and no turn is stored twice."""
    import localpager.serving.jobs as jobs

    conv = lp.conversation("c", create=True)
    conv.add_turn("user", "First.")
    conv.add_turn("assistant", "Yes.")
    real = jobs.ModelRunner._match
    calls = []

    def match_then_write(self, job):
        matched = real(self, job)
        if not calls:  # another process stores the turns this client is about to send
            other = lp.conversation("c")
            other.add_turn("user", "Second.")
            other.add_turn("assistant", "Right.")
        calls.append(matched)
        return matched

    monkeypatch.setattr(jobs.ModelRunner, "_match", match_then_write)
    with TestClient(create_app(lp, log=lambda line: None)) as client:
        r = chat(client, "c", alternating(["First.", "Yes.", "Second.", "Right.", "Third?"]))
    assert r.status_code == 200 and r.headers["x-localpager-history"] == "in-sync" and len(calls) == 2
    assert [t.text for t in lp.store.turns("c")] == ["First.", "Yes.", "Second.", "Right.", "Third?", ANSWER]
