"""Crash anywhere, many writers: workers killed with SIGKILL at random moments, several processes writing
at once, then the store reopened and checked (tests/faultkit.py). A few runs here; benchmarks/faults.py
runs many. The last tests kill the real ``localpager ask`` and run it with no network namespace."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import faultkit
import pytest

ROOT = Path(__file__).resolve().parents[1]


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
    from localpager.store.sqlite import Store

    turns = Store(store).turns("shared")
    assert len(turns) == 36
    for i, t in enumerate(turns):  # every question is followed by its own answer: asks are not interleaved
        if t.text.startswith("A question"):
            assert turns[i + 1].role == "assistant"


# -- the real command line ---------------------------------------------------------------------------------
def _cli(*args, store, **kwargs):
    env = {**os.environ, "LOCALPAGER_THREADS": "1"}
    return [sys.executable, "-m", "localpager.cli", "--store", str(store), *map(str, args)], env


@pytest.fixture(scope="module")
def real_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("real")
    data, store = d / "c.jsonl", d / "s.db"
    for args in (("generate", data, "--n", "1", "--turns", "60", "--seed", "5"), ("ingest", data)):
        cmd, env = _cli(*args, store=store)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr
    return store


@pytest.mark.model
@pytest.mark.embedder
@pytest.mark.slow
def test_the_real_ask_killed_mid_answer_leaves_a_marked_question_and_the_next_ask_works(real_store):
    from localpager.store.sqlite import Store

    conv = "synthetic-5-000"
    before = len(Store(real_store).turns(conv))
    cmd, env = _cli("ask", conv, "Which snack should I avoid?", store=real_store)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 120
    while len(Store(real_store).turns(conv)) == before and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # kill once the question is stored: the model is loading or answering
    time.sleep(random.Random(7).uniform(0, 1.5))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    check = faultkit.check_store(real_store, [], ask_after=False)
    assert check.ok, check.problems
    turns = Store(real_store).turns(conv)
    if turns[-1].role == "user":  # killed before the answer was stored: the question is marked
        assert Store(real_store).unanswered(conv) == [turns[-1].index]
    cmd, env = _cli("ask", conv, "What is my budget?", "--json", store=real_store)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["answer"]
    assert Store(real_store).unanswered(conv) == []


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


@pytest.mark.model
@pytest.mark.embedder
@pytest.mark.slow
@pytest.mark.skipif(not _unshare_works(), reason="unshare -n is not permitted here")
def test_ask_works_with_no_network_at_all(real_store):
    cmd, env = _cli("ask", "synthetic-5-000", "Where do I live?", "--json", store=real_store)
    proc = subprocess.run(["unshare", "-n", *cmd], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["answer"]
