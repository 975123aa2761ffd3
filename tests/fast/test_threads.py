"""How many llama.cpp threads a process takes (backends.llama.thread_counts, backends.cores): no model is loaded."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from localpager.backends import cores, llama
from localpager.backends.base import BackendError


@pytest.fixture
def two_cores(monkeypatch):
    monkeypatch.setattr(cores, "cpu_threads", lambda: 2)
    monkeypatch.setattr(cores, "_last", None)  # no reading reused from an earlier test
    monkeypatch.setattr(cores, "_refreshing", False)
    monkeypatch.delenv("LOCALPAGER_THREADS", raising=False)
    monkeypatch.delenv("LOCALPAGER_BATCH_THREADS", raising=False)


@pytest.mark.parametrize(("busy", "threads"), [(0.0, 2), (0.4, 2), (0.6, 1), (1.3, 1), (7.0, 1)])
def test_the_default_leaves_the_cores_other_work_keeps_busy(two_cores, monkeypatch, busy, threads):
    monkeypatch.setattr(cores, "busy_cores", lambda window=0.1: busy)
    assert llama.thread_counts() == (threads, threads)


@pytest.mark.parametrize(("load", "threads"), [(0.0, 2), (1.3, 1)])
def test_without_proc_stat_the_load_average_is_read(two_cores, monkeypatch, load, threads):
    monkeypatch.setattr(cores, "busy_cores", lambda window=0.1: None)
    monkeypatch.setattr(cores.os, "getloadavg", lambda: (load, load, load))
    assert llama.thread_counts() == (threads, threads)


def test_a_reading_is_reused_and_refreshed_off_the_asking_thread(two_cores, monkeypatch):
    readings = iter([0.0, 2.0])
    monkeypatch.setattr(cores, "busy_cores", lambda window=0.1: next(readings))
    assert cores.free_cores() == 2 and cores.free_cores() == 2  # the embedder asks at every encode
    when, free = cores._last
    monkeypatch.setattr(cores, "_last", (when - cores.REUSE_S, free))  # stale
    assert cores.free_cores() == 2  # the last reading, at once; the new one is taken on a thread of its own
    deadline = time.monotonic() + 5
    while cores._last[1] != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert cores.free_cores() == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/stat")
def test_a_core_kept_busy_by_another_process_is_seen_at_once():
    """The load average would take a minute to see it; the kernel's CPU time sees it in a tenth of a second."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # started
        assert cores.busy_cores(0.5) >= 0.6
    finally:
        hog.kill()
        hog.wait()


def test_this_process_own_work_is_not_counted_as_other_work(monkeypatch):
    ticks = iter([1000, 1100])  # 100 ticks busy on its cores, all of them this process's
    seconds = iter([5.0, 6.0])
    monkeypatch.setattr(cores, "_cpu_ticks", lambda cpus: next(ticks))
    monkeypatch.setattr(cores, "_own_seconds", lambda: next(seconds))
    monkeypatch.setattr(cores.os, "sysconf", lambda name: 100)
    assert cores.busy_cores(0.01) == 0.0


def test_the_environment_and_the_caller_decide_when_they_say(two_cores, monkeypatch):
    def unread(window=0.1):
        raise AssertionError("the cores were sampled although the environment set both counts")

    monkeypatch.setattr(cores, "busy_cores", unread)
    monkeypatch.setenv("LOCALPAGER_THREADS", "2")
    assert llama.thread_counts() == (2, 2)
    monkeypatch.setenv("LOCALPAGER_BATCH_THREADS", "3")
    assert llama.thread_counts() == (2, 3)
    assert llama.thread_counts(4) == (4, 4)


def test_threads_given_as_an_argument_count_as_the_environment_s(two_cores, monkeypatch):
    """``--threads`` (``ModelOptions.threads``) reaches the loader as an argument, and means what
    ``LOCALPAGER_THREADS`` means: ``LOCALPAGER_BATCH_THREADS`` still sets prompt reading apart."""
    def unread(window=0.1):
        raise AssertionError("the cores were sampled although the threads were given")

    monkeypatch.setattr(cores, "busy_cores", unread)
    assert llama.loader_options() == {}  # nothing given: the backend reads the environment when it loads
    assert llama.loader_options(2) == {"n_threads": 2, "n_threads_batch": 2}
    monkeypatch.setenv("LOCALPAGER_THREADS", "1")  # the argument wins, as the option does over the variable
    monkeypatch.setenv("LOCALPAGER_BATCH_THREADS", "3")
    assert llama.loader_options(2, "chatml") == {"n_threads": 2, "n_threads_batch": 3, "chat_template": "chatml"}


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_thread_count_is_a_one_line_error(two_cores, monkeypatch, value):
    monkeypatch.setenv("LOCALPAGER_THREADS", value)
    with pytest.raises(BackendError, match="LOCALPAGER_THREADS must be a positive number"):
        llama.thread_counts()
