"""benchmarks/passive_detection.py: the teacher-forced answer NLL on the real model (the separation helpers:
tests/fast/test_passive_detection.py)."""

from __future__ import annotations

import pytest
from helpers import benchmark_module

from localpager.backends.base import Message

pd = benchmark_module("passive_detection")

QUESTION = Message("user", "What is my locker number?")


@pytest.mark.model
def test_answer_nll_is_lower_when_the_fact_is_in_context():
    from localpager.backends.llama import thread_counts

    # the chat backend's thread count, not the scorer's default of two: two spinning llama.cpp threads beside another
    # busy process (a pytest-xdist worker) took 32 s here
    scorer = pd.load_scorer(n_ctx=256, n_threads=thread_counts()[0])
    present = [Message("user", "My locker number is 4417."), Message("assistant", "Noted."), QUESTION]
    absent = [Message("user", "I like green tea."), Message("assistant", "Noted."), QUESTION]
    with_fact = pd.answer_nll(scorer, present, "4417")
    without = pd.answer_nll(scorer, absent, "4417")
    assert 0 < with_fact < without
    scorer._llm.reset()  # the KV-cache reuse must not change the score
    assert pd.answer_nll(scorer, present, "4417") == pytest.approx(with_fact, abs=1e-3)


