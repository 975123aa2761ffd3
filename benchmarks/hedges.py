"""The hedge model (``core.hedges``): fitted on labelled sentences, measured on sentences it never saw.

Fitted on ``lab/data/hedges_train.json`` (hedged statements, and firm ones in the same frames) with, as firm
statements too, what the claim model takes as claims and the fact model as facts (``benchmarks/claims.py``: the
claims of ``claims_train.json``, the facts of ``statements_train.json`` and ``statements_dev.json``, the statements
of the tuning, dev and dev2 phrasing sets and of the development and training kind sets). A frame seen in one
hedged sentence alone is not learned (``MIN_SUPPORT``). The threshold is the lowest at
which, out of fold, at most ``MAX_FIRM_HEDGED`` of the firm statements read as hedged: a real fact lost costs
more than a doubt kept (it can still be corrected, and a page holds it either way). Measured, never tuned on:
``lab/data/hedges_check.json`` (written apart, other words of doubt where English has them) and the held-out
phrasing set's statements (all firm).

    .venv/bin/python benchmarks/hedges.py          # measure the shipped model
    .venv/bin/python benchmarks/hedges.py --fit    # fit it again and write localpager/core/data/hedge_model.json
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

import numpy as np

from claims import DATA, ROOT, TRAIN_PHRASINGS, arguments, fact_rows, labelled, report, write_model
from localpager.core import hedges as hedges_module
from localpager.core.hedges import MODEL_FILE, HedgeModel, shipped_model
from localpager.core.syntax import hedge_features, warm
from localpager.lab.fitting import fit_presence_logistic, threshold_above

MODEL_PATH = ROOT / "localpager" / "core" / "data" / MODEL_FILE
MAX_FIRM_HEDGED = 0.01
MIN_WEIGHT = 0.02  # a smaller weight is left out of the shipped file
# A frame seen in fewer hedged sentences is not learned from them: the other words of one sentence would weigh as
# doubt with it ("nobody ever tested it" made "ever" a doubt, and "Rosalind is my middle name, which is why I only
# ever sign with my first initial." hedged)
MIN_SUPPORT = 2


def rows(name: str) -> list[tuple[str, int]]:
    """(sentence, 1 if hedged) of a hedges file."""
    data = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    return [(s, 1) for s in data["hedged"]] + [(s, 0) for s in data["firm"]]


def firm_statements(phrasings: tuple[str, ...], facts: bool = False) -> list[tuple[str, int]]:
    """The claims the claim model is fitted on (``benchmarks/claims.py``), and with ``facts`` the facts the fact
    model is (the kind sets' statements too), each firm (0)."""
    said = [s for s, claim in labelled("claims_train", phrasings, written=True) if claim]
    said += [s for s, fact in fact_rows() if fact] if facts else []
    return [(s, 0) for s in dict.fromkeys(said)]


def supported(found: list[frozenset[str]], y: np.ndarray) -> list[frozenset[str]]:
    """Each row's features less those seen in fewer than ``MIN_SUPPORT`` hedged rows (but in some)."""
    seen: dict[str, int] = {}
    for features, label in zip(found, y):
        for f in features if label else ():
            seen[f] = seen.get(f, 0) + 1
    return [frozenset(f for f in features if seen.get(f, MIN_SUPPORT) >= MIN_SUPPORT) for features in found]


def fit(train: list[tuple[str, int]], folds: int = 5) -> HedgeModel:
    """The model on every row, its threshold the lowest at which at most ``MAX_FIRM_HEDGED`` of the firm rows
    read as hedged out of fold."""
    y = np.array([label for _, label in train], dtype=float)
    found = supported([hedge_features(s) for s, _ in train], y)
    held = np.zeros(len(train))
    for k in range(folds):
        part = np.arange(len(train)) % folds == k
        weights, bias = fit_presence_logistic([f for f, out in zip(found, part) if not out], y[~part])
        fold = HedgeModel(weights, bias)
        held[part] = [fold.probability(f) for f, out in zip(found, part) if out]
    weights, bias = fit_presence_logistic(found, y)
    threshold = threshold_above(held[y == 0], MAX_FIRM_HEDGED, floor=0.5)
    return HedgeModel({n: w for n, w in weights.items() if abs(w) >= MIN_WEIGHT}, bias, round(threshold, 4))


def scores(read: Callable[[str], bool], data: list[tuple[str, int]], examples: bool = True,
           names: tuple[str, str, str] = ("hedged", "hedges", "firm")) -> dict:
    """Hedges found by ``read`` and firm statements kept; with ``examples``, the sentences read wrongly (not of a
    held-out set: counts only). ``names``: what the labelled sentences, those found and those kept are called
    (the scene model's figures are named its own way: ``benchmarks/scenes.py``)."""
    positive, found, kept = names
    said = [(read(s), y) for s, y in data]
    count = sum(y for _, y in data)
    result = {"sentences": len(data), positive: count,
              f"{found}_found": round(sum(1 for h, y in said if h and y) / max(1, count), 3),
              f"{kept}_kept": round(sum(1 for h, y in said if not h and not y) / max(1, len(data) - count), 3)}
    if examples:
        result[f"{found}_missed"] = [s for (s, y), (h, _) in zip(data, said) if y and not h][:10]
        result[f"{kept}_{positive}"] = [s for (s, y), (h, _) in zip(data, said) if not y and h][:10]
    return result


def main() -> None:
    args = arguments(__doc__, MODEL_PATH)
    train = rows("hedges_train") + firm_statements(TRAIN_PHRASINGS, facts=True)
    model = fit(train) if args.fit else shipped_model()
    if args.fit:
        write_model(MODEL_PATH, model.to_json(), "hedges.py")
        hedges_module.shipped_model.cache_clear()
    heldout = firm_statements(("heldout",))
    hedge_features.cache_clear()
    warm()  # the parser's load is no statement's cost
    started = time.perf_counter()
    held = scores(model.hedged, heldout, examples=False)
    took = 1000 * (time.perf_counter() - started) / max(1, len(heldout))
    report({"threshold": model.threshold, "features": len(model.weights),
            "train": scores(model.hedged, train), "check": scores(model.hedged, rows("hedges_check")),
            "heldout_phrasing_statements": held,
            "heldout_parsed": round(sum(map(model.may_hedge, (s for s, _ in heldout))) / max(1, len(heldout)), 3),
            "heldout_ms_per_statement": round(took, 3)}, args.json)


if __name__ == "__main__":
    sys.exit(main())
