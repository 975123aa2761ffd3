"""The change and addition models (``core.changes``): fitted on the training sets, measured on sets never fitted on.

Rows are the templates of the phrasing sets (tuning, dev, dev2) and of the development and training kind sets: a
kind's first statements (``says``) against its corrections (``updates``), the value's slot left out. A feature seen
in fewer than ``MIN_SUPPORT`` rows is not learned (a word of one template would weigh as a change). The threshold
is the lowest at which, out of fold, at most ``MAX_FIRST_CHANGED`` of the first statements read as changes. Measured,
never tuned on: the held-out and check phrasings and the held-out kinds (rates only), each beside the lexicon's
change words alone and either of the two (``changes.says_changed``).

The addition model's rows are the sentences of ``lab/data/additions_train.json`` (one more of something, against a
change) with the training sets' first statements and corrections as no additions; its threshold is the lowest at
which, out of fold, at most ``MAX_READ_AS_ADDED`` of those read as additions. Measured on ``additions_check.json`` (written apart) and
on the held-out sets' corrections (the share read as additions).

    .venv/bin/python benchmarks/changes.py          # measure the shipped models
    .venv/bin/python benchmarks/changes.py --fit    # fit them again and write localpager/core/data/change_model.json
                                                    # and addition_model.json
"""

from __future__ import annotations

import json
import re
import sys

import numpy as np

from claims import DATA, ROOT, arguments, report, write_model
from localpager.core import changes as changes_module
from localpager.core.changes import (ADDITION_FILE, CHANGE_CUE, MODEL_FILE, ChangeModel, addition_model, features,
                                     shipped_model)
from localpager.lab.fitting import fit_presence_logistic, threshold_above

MODEL_PATH = ROOT / "localpager" / "core" / "data" / MODEL_FILE
ADDITION_PATH = MODEL_PATH.with_name(ADDITION_FILE)
TRAIN_SETS = ("phrasing_tuning", "phrasing_dev", "phrasing_dev2", "kinds_dev", "kinds_train")
CHECK_SETS = ("phrasing_heldout", "phrasing_check", "kinds_heldout")
MIN_SUPPORT = 3
MAX_FIRST_CHANGED = 0.05
MAX_READ_AS_ADDED = 0.02
ADDITION_MIN_SUPPORT = 5  # chosen out of fold on the training rows (0.75 of additions found at 2% of others; 3: 0.68)
L2 = 1.0


def rows(names: tuple[str, ...]) -> list[tuple[str, int]]:
    """(template, 1 if a correction) of the sets ``names``, the value's slot left out."""
    out = []
    for name in names:
        for kind in json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))["kinds"].values():
            out += [(t, 0) for t in kind["says"]] + [(t, 1) for t in kind.get("updates", [])]
    return [(re.sub(r"\{\w+\}", " ", t), label) for t, label in out]


def addition_rows(name: str, statements: list[tuple[str, int]] = ()) -> list[tuple[str, int]]:
    """(sentence, 1 if it tells one more of something) of ``lab/data/{name}.json``, with ``statements`` (the
    training sets' first statements and corrections: ``rows``) as no additions."""
    data = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    return ([(t, 1) for t in data["added"]] + [(t, 0) for t in data.get("first", []) + data["replaced"]]
            + [(t, 0) for t, _ in statements])


def fit(train: list[tuple[str, int]], max_negative: float = MAX_FIRST_CHANGED, folds: int = 5,
        min_support: int = MIN_SUPPORT, unchanged: bool = False) -> ChangeModel:
    """The model on every row, its features those seen in ``min_support`` rows, its threshold the lowest at which
    at most ``max_negative`` of the rows labelled 0 read as 1 out of fold; with ``unchanged``, read without the
    change words (the addition model: ``ChangeModel.unchanged``)."""
    found = [features(t, unchanged) for t, _ in train]
    seen: dict[str, int] = {}
    for row in found:
        for f in row:
            seen[f] = seen.get(f, 0) + 1
    found = [frozenset(f for f in row if seen[f] >= min_support) for row in found]
    y = np.array([label for _, label in train], dtype=float)
    held = np.zeros(len(y))
    for k in range(folds):
        part = np.arange(len(y)) % folds == k
        weights, bias = fit_presence_logistic([r for r, out in zip(found, part) if not out], y[~part], l2=L2)
        fold = ChangeModel(weights, bias)
        held[part] = [fold.probability_of(r) for r, out in zip(found, part) if out]
    weights, bias = fit_presence_logistic(found, y, l2=L2)
    return ChangeModel(weights, bias, round(threshold_above(held[y == 0], max_negative, floor=0.5), 4), unchanged)


def shares(read, data: list[tuple[str, int]], names: tuple[str, str, str, str]) -> dict:
    """How many rows are labelled 1 and 0 (``names[0]``, ``names[1]``), and the shares of each that ``read`` takes
    (``names[2]``, ``names[3]``)."""
    said = [(read(t), label) for t, label in data]
    positive = sum(label for _, label in data)
    negative = len(data) - positive
    return {names[0]: positive, names[1]: negative,
            names[2]: round(sum(s for s, label in said if label) / max(1, positive), 3),
            names[3]: round(sum(s for s, label in said if not label) / max(1, negative), 3)}


def rates(read, data: list[tuple[str, int]]) -> dict:
    """Corrections read as changes, and first statements read as changes."""
    return shares(read, data, ("corrections", "first_statements", "corrections_found", "first_read_as_changed"))


def additions(read, data: list[tuple[str, int]]) -> dict:
    """Additions read as additions, and other statements (changes, first statements) read as additions."""
    return shares(read, data, ("additions", "others", "additions_found", "others_read_as_added"))


def main() -> None:
    args = arguments(__doc__, MODEL_PATH)
    train = rows(TRAIN_SETS)
    added_train = addition_rows("additions_train", train)
    model = fit(train) if args.fit else shipped_model()
    adding = (fit(added_train, MAX_READ_AS_ADDED, min_support=ADDITION_MIN_SUPPORT, unchanged=True) if args.fit
              else addition_model())
    if args.fit:
        write_model(MODEL_PATH, model.to_json(), "changes.py")
        write_model(ADDITION_PATH, adding.to_json(), "changes.py")
        for cached in (changes_module.shipped_model, changes_module.addition_model, changes_module.adds,
                       changes_module.says_changed):
            cached.cache_clear()
    reads_added = lambda t: adding.probability(t) >= adding.threshold  # noqa: E731
    result = {"threshold": model.threshold, "features": len(model.weights),
              "train": rates(lambda t: model.probability(t) >= model.threshold, train)}
    addition = {"threshold": adding.threshold, "features": len(adding.weights),
                "train": additions(reads_added, added_train),
                "additions_check": additions(reads_added, addition_rows("additions_check"))}
    for name in CHECK_SETS:
        data = rows((name,))
        result[name] = {"change_words": rates(lambda t: bool(CHANGE_CUE.search(t)), data),
                        "model": rates(lambda t: model.probability(t) >= model.threshold, data),
                        "either": rates(changes_module.says_changed, data)}
        addition[name] = {  # the held-out sets' statements read as additions: first statements, then corrections
            "first_statements": additions(reads_added, [(t, 0) for t, label in data if not label]),
            "corrections": additions(reads_added, [(t, 0) for t, label in data if label])}
    result["addition"] = addition
    report(result, args.json)


if __name__ == "__main__":
    sys.exit(main())
