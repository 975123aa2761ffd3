"""The scene model (``core.scenes``): fitted on labelled sentences, measured on sentences it never saw.

Fitted on ``lab/data/scenes_train.json`` (statements set in a made-up world, and ones set in the speaker's own in
the same frames) with, as real scenes too, those of the claims and facts the claim and fact models are fitted on
(``benchmarks/hedges.py``'s firm statements). One row per scene (``syntax.scenes``: the parser's vectors of the
preposition and its noun), labelled as its sentence. The threshold is the lowest at which, out of fold, at most
``MAX_REAL_IMAGINED`` of the real sentences read as made up: a real fact lost costs more than a made-up one kept
(it can be forgotten, and a page holds it either way). Measured, never tuned on: ``lab/data/scenes_check.json``
(written apart, other scenes) and the held-out phrasing set's statements (all real).

    .venv/bin/python benchmarks/scenes.py          # measure the shipped model
    .venv/bin/python benchmarks/scenes.py --fit    # fit it again and write localpager/core/data/scene_model.json
"""

from __future__ import annotations

import json
import sys
import time
import zlib

import numpy as np

from claims import DATA, ROOT, TRAIN_PHRASINGS, arguments, report, write_model
from hedges import firm_statements
from hedges import scores as hedge_scores
from localpager.core import scenes as scenes_module
from localpager.core.scenes import MODEL_FILE, SceneModel, shipped_model
from localpager.core.syntax import scenes, warm
from localpager.core.word_vectors import default_vectors
from localpager.lab.fitting import fit_out_of_fold, threshold_above

MODEL_PATH = ROOT / "localpager" / "core" / "data" / MODEL_FILE
MAX_REAL_IMAGINED = 0.01
L2 = 10.0  # the word vectors have 384 dimensions and the made-up scenes number a few dozen


def rows(name: str) -> list[tuple[str, int]]:
    """(sentence, 1 if set in a made-up world) of a scenes file."""
    data = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    return [(s, 1) for s in data["imagined"]] + [(s, 0) for s in data["real"]]


def fit(train: list[tuple[str, int]], folds: int = 5) -> SceneModel:
    """The model on every scene of ``train``'s sentences, its threshold the lowest at which at most
    ``MAX_REAL_IMAGINED`` of the real sentences with a scene read as made up out of fold; the folds split by
    noun, so that a noun out of fold is one the model never saw."""
    vectors = default_vectors()
    found = [(n, scene, label) for n, (text, label) in enumerate(train) for scene in scenes(text)]
    names = sorted({m for _, scene, _ in found for m in scene.marks})
    x = np.array([np.r_[vectors.of(scene.noun), [m in scene.marks for m in names]] for _, scene, _ in found],
                 dtype=np.float64)
    y = np.array([label for _, _, label in found], dtype=np.float64)
    sentence = np.array([n for n, _, _ in found])
    fold = np.array([zlib.crc32(scene.noun.lower().encode()) % folds for _, scene, _ in found])
    weights, bias, held = fit_out_of_fold(x, y, fold, L2)
    real = [max(held[sentence == n]) for n in set(sentence[y == 0])]
    threshold = threshold_above(real, MAX_REAL_IMAGINED, floor=0.5)
    dense = vectors.dimensions
    marks = {name: round(float(w), 6) for name, w in zip(names, weights[dense:]) if abs(w) >= 1e-6}
    openers = {scene.words.split()[0].lower() for _, scene, label in found if label and "first" in scene.marks}
    return SceneModel(weights[:dense].astype(np.float32), marks, round(bias, 6), round(threshold, 4),
                      frozenset(openers))


def scores(model: SceneModel, data: list[tuple[str, int]], examples: bool = True) -> dict:
    """Made-up scenes found and real statements kept (``hedges.scores``, named for scenes)."""
    return hedge_scores(model.imagined, data, examples, ("imagined", "imagined", "real"))


def main() -> None:
    args = arguments(__doc__, MODEL_PATH)
    warm()  # the parser's load is no statement's cost
    train = rows("scenes_train") + firm_statements(TRAIN_PHRASINGS, facts=True)
    model = fit(train) if args.fit else shipped_model()
    if args.fit:
        write_model(MODEL_PATH, model.to_json(), "scenes.py")
        scenes_module.shipped_model.cache_clear()
    heldout = firm_statements(("heldout",))
    started = time.perf_counter()
    held = scores(model, heldout, examples=False)
    took = 1000 * (time.perf_counter() - started) / max(1, len(heldout))
    report({"threshold": model.threshold, "openers": sorted(model.openers),
            "train": scores(model, train), "check": scores(model, rows("scenes_check")),
            "heldout_phrasing_statements": held, "heldout_ms_per_statement": round(took, 3)}, args.json)


if __name__ == "__main__":
    sys.exit(main())
