"""Fitting the product's small logistic models (the recall gate, the fact model, the relevance floor) on tuning
data: what ``benchmarks/recall_gate.py``, ``standing_facts.py`` and ``abstention.py`` share.

Each model is a ``retrieval.gate.GateModel``: standardised features, weights, a bias and a threshold, plain
arithmetic at run time. The fit is L2-regularised logistic regression by Newton's method (numpy only).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..retrieval.gate import GateModel


def fit_logistic(x: np.ndarray, y: np.ndarray, weight: np.ndarray, l2: float = 1.0, steps: int = 50):
    """L2-regularised logistic regression by Newton's method on standardised features: (beta, mean, scale),
    beta[0] the bias."""
    mean, scale = x.mean(0), x.std(0)
    scale[scale == 0] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    beta = np.zeros(z.shape[1])
    penalty = l2 * np.diag(np.r_[0.0, np.ones(z.shape[1] - 1)])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-z @ beta))
        gradient = z.T @ (weight * (p - y)) + penalty @ beta
        hessian = (z * (weight * p * (1 - p))[:, None]).T @ z + penalty
        beta -= np.linalg.solve(hessian, gradient)
    return beta, mean, scale


def fit_raw_logistic(x: np.ndarray, y: np.ndarray, weight: np.ndarray, l2: float = 1.0) -> tuple[np.ndarray, float]:
    """``fit_logistic`` with its standardisation folded in: (weights over the raw features, bias), what a model
    that reads raw values at run time keeps."""
    beta, mean, scale = fit_logistic(x, y, weight, l2)
    weights = beta[1:] / scale
    return weights, float(beta[0] - weights @ mean)


def fit_out_of_fold(x: np.ndarray, y: np.ndarray, fold: np.ndarray, l2: float) -> tuple[np.ndarray, float, np.ndarray]:
    """``fit_raw_logistic`` with both labels weighed alike, on all rows, and each row's probability from a fit
    without its fold (``fold``: each row's): (weights, bias, those probabilities), for a threshold chosen on rows a
    model did not see."""
    balance = np.where(y == 1, 0.5 / y.sum(), 0.5 / (1 - y).sum()) * len(y)
    held = np.zeros(len(y))
    for k in np.unique(fold):
        part = fold == k
        weights, bias = fit_raw_logistic(x[~part], y[~part], balance[~part], l2)
        held[part] = 1 / (1 + np.exp(-(x[part] @ weights + bias)))
    weights, bias = fit_raw_logistic(x, y, balance, l2)
    return weights, bias, held


def threshold_above(negatives: np.ndarray, share: float, floor: float = 0.0) -> float:
    """The lowest threshold at which at most ``share`` of ``negatives`` (out-of-fold scores of what must not pass)
    reach it: just above the highest of them that may not; at least ``floor``."""
    ranked = np.sort(np.asarray(negatives, dtype=float))[::-1]
    return max(floor, float(ranked[int(share * len(ranked))]) + 1e-4)


def fit_model(names: Sequence[str], x: np.ndarray, y: np.ndarray, weight: np.ndarray, threshold: float = 0.5,
              l2: float = 1.0) -> GateModel:
    """A ``GateModel`` over the features ``names`` (the columns of ``x``), fitted on (x, y) weighted."""
    beta, mean, scale = fit_logistic(x, y, weight, l2)
    return GateModel(weights=dict(zip(names, beta[1:].round(4).tolist())), bias=round(float(beta[0]), 4),
                     means=dict(zip(names, mean.round(4).tolist())), scales=dict(zip(names, scale.round(4).tolist())),
                     threshold=threshold)


def probabilities(model: GateModel, x: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """The model's probability for each row of ``x`` (columns ``names``), as it computes it at run time."""
    z = np.full(len(x), model.bias)
    for j, name in enumerate(names):
        w = model.weights.get(name)
        if w:
            z += w * (x[:, j] - model.means.get(name, 0.0)) / (model.scales.get(name, 1.0) or 1.0)
    return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))


def equal_error(positive: np.ndarray, negative: np.ndarray) -> float:
    """The threshold at which the share of ``positive`` scores below it equals the share of ``negative`` scores
    at or above it: neither error cheaper than the other."""
    best, gap = 0.5, np.inf
    for t in np.sort(positive):
        missed, fired = float(np.mean(positive < t)), float(np.mean(negative >= t))
        if abs(missed - fired) < gap:
            best, gap = float(t), abs(missed - fired)
    return round(best - 1e-4, 4)


def model_source(name: str, model: GateModel) -> str:
    """The fitted model as Python, to paste where the product keeps it."""
    return (f"{name} = GateModel(\n    weights={model.weights},\n    bias={model.bias},\n"
            f"    means={model.means},\n    scales={model.scales},\n    threshold={model.threshold},\n)")


def fit_presence_logistic(rows: Sequence[set[str]], y: np.ndarray, l2: float = 1.0, steps: int = 3000,
                          rate: float = 2.0) -> tuple[dict[str, float], float]:
    """L2-regularised logistic regression over presence features (each row the set of its feature names), by
    full-batch gradient descent on a sparse matrix, each class weighing half: (weights of the features seen,
    bias). What ``core.claims.ClaimModel`` runs."""
    from scipy.sparse import csr_matrix

    names = sorted(set().union(*rows))
    column = {n: j for j, n in enumerate(names)}
    indices = [column[n] for row in rows for n in sorted(row)]
    indptr = np.cumsum([0] + [len(row) for row in rows])
    x = csr_matrix((np.ones(len(indices)), indices, indptr), shape=(len(rows), len(names)))
    w, b = np.zeros(len(names)), 0.0
    balance = np.where(y == 1, 0.5 / max(1, y.sum()), 0.5 / max(1, (1 - y).sum()))
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(x @ w + b)))
        g = balance * (p - y)
        w -= rate * (x.T @ g + l2 * w / len(rows))
        b -= rate * g.sum()
    return {n: round(float(v), 4) for n, v in zip(names, w) if abs(v) >= 1e-3}, round(float(b), 4)
