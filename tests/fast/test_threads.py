"""How many llama.cpp threads a process takes (backends.llama.thread_counts): no model is loaded."""

from __future__ import annotations

import pytest

from localpager.backends import llama
from localpager.backends.base import BackendError


@pytest.fixture
def two_cores(monkeypatch):
    monkeypatch.setattr(llama, "cpu_threads", lambda: 2)
    monkeypatch.delenv("LOCALPAGER_THREADS", raising=False)
    monkeypatch.delenv("LOCALPAGER_BATCH_THREADS", raising=False)


@pytest.mark.parametrize(("load", "threads"), [(0.0, 2), (0.4, 2), (0.6, 1), (1.3, 1), (7.0, 1)])
def test_the_default_leaves_the_cores_other_work_keeps_busy(two_cores, monkeypatch, load, threads):
    monkeypatch.setattr(llama.os, "getloadavg", lambda: (load, load, load))
    assert llama.thread_counts() == (threads, threads)


def test_the_environment_and_the_caller_decide_when_they_say(two_cores, monkeypatch):
    monkeypatch.setattr(llama.os, "getloadavg", lambda: (5.0, 5.0, 5.0))
    monkeypatch.setenv("LOCALPAGER_THREADS", "2")
    assert llama.thread_counts() == (2, 2)
    monkeypatch.setenv("LOCALPAGER_BATCH_THREADS", "3")
    assert llama.thread_counts() == (2, 3)
    assert llama.thread_counts(4) == (4, 4)


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_thread_count_is_a_one_line_error(two_cores, monkeypatch, value):
    monkeypatch.setenv("LOCALPAGER_THREADS", value)
    with pytest.raises(BackendError, match="LOCALPAGER_THREADS must be a positive number"):
        llama.thread_counts()
