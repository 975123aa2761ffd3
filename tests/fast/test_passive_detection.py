"""benchmarks/passive_detection.py: the separation helpers on hand-made scores (the answer NLL on the real model:
tests/model/test_passive_detection.py)."""

from __future__ import annotations

from helpers import benchmark_module

pd = benchmark_module("passive_detection")


def test_roc_auc_on_hand_made_scores():
    assert pd.roc_auc([2.0, 3.0], [0.0, 1.0]) == 1.0
    assert pd.roc_auc([1.0, 1.0], [1.0, 1.0]) == 0.5
    assert pd.roc_auc([0.0, 1.0], [2.0, 3.0]) == 0.0
    assert pd.roc_auc([1.0, 3.0], [0.0, 2.0]) == 0.75


def test_best_threshold_accuracy_on_hand_made_scores():
    assert pd.best_threshold_accuracy([2.0, 3.0], [0.0, 1.0]) == 1.0
    assert pd.best_threshold_accuracy([1.0, 3.0], [0.0, 2.0]) == 0.75
