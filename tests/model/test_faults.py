"""The real ``localpager ask`` killed mid-answer, and run with no network namespace, then the store checked
(tests/faultkit.py). Workers on the fakes killed at random moments and many writers at once:
tests/fast/test_faults.py."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import faultkit
import pytest

pytestmark = [pytest.mark.model, pytest.mark.embedder, pytest.mark.slow]


# -- the real command line ---------------------------------------------------------------------------------
def _cli(*args, store, **kwargs):
    env = {**os.environ, "LOCALPAGER_THREADS": "1"}
    return [sys.executable, "-m", "localpager.cli", "--store", str(store), *map(str, args)], env


@pytest.fixture(scope="module")
def real_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("real")
    data, store = d / "c.jsonl", d / "s.db"
    for args in (("lab", "generate", data, "--n", "1", "--turns", "60", "--seed", "5"), ("ingest", data)):
        cmd, env = _cli(*args, store=store)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr
    return store


def test_the_real_ask_killed_mid_answer_leaves_a_marked_question_and_the_next_ask_works(real_store):
    from localpager.store.sqlite import SQLiteStore

    conv = "synthetic-5-000"
    before = len(SQLiteStore(real_store).turns(conv))
    cmd, env = _cli("ask", conv, "Which snack should I avoid?", store=real_store)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 120
    while len(SQLiteStore(real_store).turns(conv)) == before and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # kill once the question is stored: the model is loading or answering
    time.sleep(random.Random(7).uniform(0, 1.5))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    check = faultkit.check_store(real_store, [], ask_after=False)
    assert check.ok, check.problems
    turns = SQLiteStore(real_store).turns(conv)
    if turns[-1].role == "user":  # killed before the answer was stored: the question is marked
        assert SQLiteStore(real_store).unanswered(conv) == [turns[-1].index]
    cmd, env = _cli("ask", conv, "What is my budget?", "--json", store=real_store)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["answer"]
    assert SQLiteStore(real_store).unanswered(conv) == []


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="unshare -n is not permitted here")
def test_ask_works_with_no_network_at_all(real_store):
    cmd, env = _cli("ask", "synthetic-5-000", "Where do I live?", "--json", store=real_store)
    proc = subprocess.run(["unshare", "-n", *cmd], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["answer"]
