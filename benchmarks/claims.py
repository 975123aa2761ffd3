"""The claim model (``core.claims``): fitted on labelled sentences, measured on sentences it never saw.

Fitted on ``lab/data/claims_train.json`` and the fact templates of the tuning, dev and dev2 phrasing sets (their
statements' sentences are claims; the questions of their questions, implicit questions and general questions are
not), values drawn from the generator's word pools. Measured, never tuned on: ``lab/data/claims_check.json`` (written apart, other verbs and
frames) and the held-out phrasing set's templates. The threshold is the lowest at which at most 2% of the training
claims are refused: refusing a real fact costs more than letting a request through (the extractor still has to
find a fact in it).

    .venv/bin/python benchmarks/claims.py            # measure the shipped model
    .venv/bin/python benchmarks/claims.py --fit      # fit it again and write localpager/core/data/claim_model.json
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

import numpy as np

from localpager.core.claims import MODEL_FILE, ClaimModel, default_model, features, mask_quotes
from localpager.core.text import is_question, sentences
from localpager.lab.fitting import fit_presence_logistic
from localpager.lab.synthetic import WORD_POOLS

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "localpager" / "lab" / "data"
MODEL_PATH = ROOT / "localpager" / "core" / "data" / MODEL_FILE
TRAIN_PHRASINGS = ("tuning", "dev", "dev2")
CHECK_PHRASINGS = ("heldout",)
MAX_REFUSED = 0.02  # training claims the threshold may refuse
MIN_WEIGHT = 0.02  # a smaller weight is left out of the shipped file (it moves no probability by more than 0.5%)


def _fill(template: str, rng: random.Random) -> str:
    pools = list(WORD_POOLS.values())
    return re.sub(r"\{\w+\}", lambda _: rng.choice(rng.choice(pools))[0], template)


def labelled(name: str, phrasings: tuple[str, ...], seed: int = 0) -> list[tuple[str, int]]:
    """(sentence, 1 if a claim) of a claims file and the phrasing sets' templates, quotations masked."""
    rng = random.Random(seed)
    data = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    rows = [(s, 1) for s in data["claims"]] + [(s, 0) for s in data["not_claims"]]
    for phrasing in phrasings:
        sets = json.loads((DATA / f"phrasing_{phrasing}.json").read_text(encoding="utf-8"))
        for kind in sets["kinds"].values():  # by sentence, as the extractor reads them
            said = [s for t in kind["says"] + kind.get("updates", []) for s in sentences(_fill(t, rng))]
            asked = [s for t in kind["asks"] + kind["implicit"] for s in sentences(_fill(t, rng))]
            rows += [(s, 1) for s in said if not is_question(s)]  # "... Can you help me structure it?" asks
            rows += [(s, 0) for s in asked if is_question(s)]  # "I'm packing for a flight." states a situation
        rows += [(q, 0) for group in sets["general"].values() for q in group]
    return [(mask_quotes(s), y) for s, y in rows]


def scores(model: ClaimModel, rows: list[tuple[str, int]]) -> dict:
    said = [(model.is_claim(s), y) for s, y in rows]
    tp = sum(1 for c, y in said if c and y)
    claims, refused = sum(y for _, y in rows), [s for (s, y), (c, _) in zip(rows, said) if y and not c]
    passed = [s for (s, y), (c, _) in zip(rows, said) if not y and c]
    return {"sentences": len(rows), "claims": claims, "recall": round(tp / max(1, claims), 3),
            "precision": round(tp / max(1, tp + len(passed)), 3),
            "non_claims_refused": round(1 - len(passed) / max(1, len(rows) - claims), 3),
            "claims_refused": refused[:8], "non_claims_passed": passed[:8]}


def fit(rows: list[tuple[str, int]], folds: int = 5) -> ClaimModel:
    """The model on every row; its threshold from out-of-fold probabilities (a model fitted without the row),
    so that it holds for sentences the model has not seen: the lowest that refuses at most ``MAX_REFUSED`` of them."""
    rows_features = [features(s) for s, _ in rows]
    y = np.array([label for _, label in rows], dtype=float)
    held = np.zeros(len(rows))
    for k in range(folds):
        part = np.arange(len(rows)) % folds == k
        weights, bias = fit_presence_logistic([f for f, out in zip(rows_features, part) if not out], y[~part])
        fold = ClaimModel(weights, bias)
        held[part] = [fold.probability(s) for (s, _), out in zip(rows, part) if out]
    weights, bias = fit_presence_logistic(rows_features, y)
    weights = {n: w for n, w in weights.items() if abs(w) >= MIN_WEIGHT}
    p = np.sort(held[y == 1])
    return ClaimModel(weights, bias, round(min(0.5, float(p[int(MAX_REFUSED * len(p))]) - 1e-4), 4))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="fit again and write " + str(MODEL_PATH.relative_to(ROOT)))
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    train = labelled("claims_train", TRAIN_PHRASINGS)
    check = labelled("claims_check", CHECK_PHRASINGS)
    model = default_model()
    if args.fit:
        model = fit(train)
        about = [line for line in (__doc__ or "").splitlines()[:1]]
        MODEL_PATH.write_text(json.dumps({"about": about + ["Written by benchmarks/claims.py --fit."],
                                          **model.to_json()}, indent=0, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    written = labelled("claims_check", ())
    result = {"threshold": model.threshold, "features": len(model.weights), "train": scores(model, train),
              "check": scores(model, check), "check_written": scores(model, written)}
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
