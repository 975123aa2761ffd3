"""Crash anywhere, many writers: workers on the fakes killed with SIGKILL at random moments, several processes
writing at once, then the store reopened and checked (tests/faultkit.py). A few runs here; benchmarks/faults.py
runs many. The real ``localpager ask`` killed mid-answer: tests/model/test_faults.py."""

from __future__ import annotations

import random

import faultkit
import pytest


@pytest.mark.slow
@pytest.mark.parametrize("op, seed", [("ask", 1), ("add", 2), ("maintain", 3), ("ingest", 4)])
def test_a_worker_killed_at_a_random_moment_loses_nothing_acknowledged(tmp_path, op, seed):
    rng = random.Random(seed)
    store = tmp_path / "s.db"
    acked = []
    for run in range(2):
        a, killed, err = faultkit.run_killed(op, store, f"k-{op}", 60 if op != "ingest" else 3, f"T{run}", rng,
                                             window=(0.8, 2.0) if op != "ingest" else (1.5, 4.0))
        assert killed or "Traceback" not in err, err
        acked.append(a)
        check = faultkit.check_store(store, acked)
        assert check.ok, (check.lost, check.problems)


@pytest.mark.slow
def test_several_processes_append_at_once_and_every_acknowledged_turn_is_stored_once_in_order(tmp_path):
    store = tmp_path / "s.db"
    jobs = [("ask", "shared", 6, "A"), ("add", "shared", 12, "B"), ("add", "shared", 12, "C"),
            ("add", "own-d", 12, "D"), ("ask", "own-e", 6, "E")]
    acked, errors = faultkit.run_concurrent(jobs, store)
    assert errors == []
    assert [len(a.turns) for a in acked] == [12, 12, 12, 12, 12]
    check = faultkit.check_store(store, acked, ask_after=False)
    assert check.ok, (check.lost, check.problems)
    from localpager.store.sqlite import SQLiteStore

    turns = SQLiteStore(store).turns("shared")
    assert len(turns) == 36
    for i, t in enumerate(turns):  # every question is followed by its own answer: asks are not interleaved
        if t.text.startswith("A question"):
            assert turns[i + 1].role == "assistant"
