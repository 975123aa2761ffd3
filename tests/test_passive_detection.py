"""benchmarks/passive_detection.py: the teacher-forced answer NLL and the separation helpers."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from localpager.backends.base import Message

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "passive_detection.py"
_spec = importlib.util.spec_from_file_location("passive_detection", _PATH)
pd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pd)

QUESTION = Message("user", "What is my locker number?")


@pytest.mark.model
def test_answer_nll_is_lower_when_the_fact_is_in_context():
    scorer = pd.load_scorer(n_ctx=256)
    present = [Message("user", "My locker number is 4417."), Message("assistant", "Noted."), QUESTION]
    absent = [Message("user", "I like green tea."), Message("assistant", "Noted."), QUESTION]
    with_fact = pd.answer_nll(scorer, present, "4417")
    without = pd.answer_nll(scorer, absent, "4417")
    assert 0 < with_fact < without
    scorer._llm.reset()  # the KV-cache reuse must not change the score
    assert pd.answer_nll(scorer, present, "4417") == pytest.approx(with_fact, abs=1e-3)


def test_roc_auc_on_hand_made_scores():
    assert pd.roc_auc([2.0, 3.0], [0.0, 1.0]) == 1.0
    assert pd.roc_auc([1.0, 1.0], [1.0, 1.0]) == 0.5
    assert pd.roc_auc([0.0, 1.0], [2.0, 3.0]) == 0.0
    assert pd.roc_auc([1.0, 3.0], [0.0, 2.0]) == 0.75


def test_best_threshold_accuracy_on_hand_made_scores():
    assert pd.best_threshold_accuracy([2.0, 3.0], [0.0, 1.0]) == 1.0
    assert pd.best_threshold_accuracy([1.0, 3.0], [0.0, 2.0]) == 0.75
