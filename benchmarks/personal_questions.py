"""The personal-question model (``core.personal``): fitted on labelled questions, measured on questions it never saw.

Fitted on ``lab/data/personal_train.json`` and the tuning, dev and dev2 phrasing sets: their fact questions
(``asks``: each needs the speaker's own fact) are personal, their general questions are not. The implicit questions
("I'm packing snacks for a flight. Anything I should stay away from?") are left out of the fit: they need a fact
when there is one, and are fair advice questions when there is none, so the model must not learn them either way;
their rate is reported. The threshold is the lowest at which at most ``MAX_GENERAL`` of the general questions
(out of fold) are called personal: a general question called personal may be answered "I don't remember that",
worse than a personal one answered as today.

Measured, never fitted on: ``personal_check.json`` (written apart), the held-out phrasing set and the held-out
kinds (``kinds_heldout.json``).

The same rows fit the vector model (``retrieval.personal_vectors``: the question's embedding and the frame model's
log-odds), with its threshold chosen the same way, written to ``retrieval/data/personal_vectors.json``; it is
measured beside the frame model (``vectors``).

    .venv/bin/python benchmarks/personal_questions.py          # measure the shipped model
    .venv/bin/python benchmarks/personal_questions.py --fit    # fit it again and write core/data/personal_model.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from claims import DATA, ROOT, TRAIN_PHRASINGS, _fill, out_of_fold  # noqa: E402

from localpager.core import claims as claims_module  # noqa: E402
from localpager.core.claims import ClaimModel, mask_quotes  # noqa: E402
from localpager.core.personal import MODEL_FILE, VALUE_MODEL_FILE, personal_model, value_model  # noqa: E402
from localpager.core.text import is_question  # noqa: E402
from localpager.lab.fitting import fit_raw_logistic, threshold_above  # noqa: E402
from localpager.retrieval import personal_vectors  # noqa: E402
from localpager.retrieval.embedder import default_embedder  # noqa: E402
from localpager.retrieval.personal_vectors import PersonalQuestions, VectorQuestionModel, frame_logit  # noqa: E402

MODEL_PATH = ROOT / "localpager" / "core" / "data" / MODEL_FILE
VALUE_MODEL_PATH = ROOT / "localpager" / "core" / "data" / VALUE_MODEL_FILE
VECTORS_PATH = ROOT / "localpager" / "retrieval" / "data" / personal_vectors.MODEL_FILE
MAX_GENERAL = 0.05  # general questions (out of fold) the threshold may call personal
MAX_VALUE_MISSED = 0.05  # questions asking for a told value (out of fold) the value model may call help


def _load(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))


def fact_questions(name: str, rng: random.Random) -> tuple[list[str], list[str]]:
    """A phrasing or kinds file's fact questions, filled: those asking for the fact (``asks``), then the implicit
    ones (in that order, so that ``rng`` fills them alike whoever asks)."""
    kinds = _load(name)["kinds"].values()
    asks = [_fill(q, rng) for kind in kinds for q in kind["asks"]]
    return asks, [_fill(q, rng) for kind in kinds for q in kind["implicit"]]


def phrasing_rows(name: str, rng: random.Random) -> tuple[list[tuple[str, int]], list[str]]:
    """(question, 1 if personal) of a phrasing or kinds file: its ``asks`` and general questions; and its implicit
    questions apart."""
    asks, implicit = fact_questions(name, rng)
    rows = [(q, 1) for q in asks] + [(q, 0) for group in _load(name)["general"].values() for q in group]
    return rows, implicit


def written_rows(name: str) -> list[tuple[str, int]]:
    data = _load(name)
    return [(q, 1) for q in data["personal"]] + [(q, 0) for q in data["general"]]


def training_rows(seed: int = 0) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    rows = written_rows("personal_train")
    for phrasing in TRAIN_PHRASINGS:
        rows += phrasing_rows(f"phrasing_{phrasing}", rng)[0]
    return [(mask_quotes(q), y) for q, y in rows]


def value_rows(seed: int = 0) -> list[tuple[str, int]]:
    """(question, 1 if it asks for a told value) for the value-question model: the phrasing sets' fact questions
    (1) against their implicit ones (0), and the hand-labelled personal (1) and general (0) questions."""
    rng = random.Random(seed)
    rows = written_rows("personal_train")
    for phrasing in TRAIN_PHRASINGS:
        asks, implicit = fact_questions(f"phrasing_{phrasing}", rng)
        rows += [(q, 1) for q in asks] + [(q, 0) for q in implicit]
    return [(mask_quotes(q), y) for q, y in rows]


def fit_value(rows: list[tuple[str, int]]) -> ClaimModel:
    """The lowest threshold at which at most ``MAX_VALUE_MISSED`` of the value questions, out of fold, are called
    help: a value question called help is answered by the model (which may invent), worse than help refused."""
    model, held = out_of_fold(rows, worded=False)
    value = np.sort(held[np.array([y for _, y in rows]) == 1])
    return ClaimModel(model.weights, model.bias, round(float(value[int(MAX_VALUE_MISSED * len(value))]) - 1e-4, 4))


def value_rates(model: ClaimModel, name: str, rng: random.Random) -> dict:
    """Of a phrasing or kinds file: its fact questions kept as asking for a value, its implicit ones called so."""
    asks, implicit = fact_questions(name, rng)
    said = lambda qs: round(float(np.mean([model.is_claim(mask_quotes(q)) for q in qs])), 3)
    return {"asks": len(asks), "asks_kept": said(asks), "implicit": len(implicit),
            "implicit_called_value": said(implicit)}


def fit(rows: list[tuple[str, int]]) -> ClaimModel:
    """The lowest threshold at which at most ``MAX_GENERAL`` of the general questions, out of fold, are personal."""
    model, held = out_of_fold(rows, worded=False)
    threshold = threshold_above(held[np.array([y for _, y in rows]) == 0], MAX_GENERAL)
    return ClaimModel(model.weights, model.bias, round(threshold, 4))


def _vector_rows(embed, rows: list[tuple[str, int]]) -> np.ndarray:
    """Each row's unit vector and the frame model's log-odds, as ``PersonalQuestions`` reads them."""
    vectors = np.asarray(embed([q for q, _ in rows]), dtype=np.float64)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    return np.c_[vectors, [frame_logit(q) for q, _ in rows]]


def _logistic(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Weights over raw features and a bias (the standardisation folded in), every row weighing one."""
    return fit_raw_logistic(x, y, np.ones(len(y)))


def fit_vectors(rows: list[tuple[str, int]], embed, folds: int = 5) -> VectorQuestionModel:
    """The vector model: the lowest threshold at which at most ``MAX_GENERAL`` of the general questions, out of
    fold, are personal (as the frame model's)."""
    x, y = _vector_rows(embed, rows), np.array([label for _, label in rows], dtype=float)
    held = np.zeros(len(y))
    for k in range(folds):
        part = np.arange(len(y)) % folds == k
        w, b = _logistic(x[~part], y[~part])
        held[part] = 1 / (1 + np.exp(-(x[part] @ w + b)))
    w, b = _logistic(x, y)
    probe = rows[0][0]
    vector = np.asarray(embed([probe]), dtype=np.float64)[0]
    threshold = round(threshold_above(held[y == 0], MAX_GENERAL), 4)
    return VectorQuestionModel(w[:-1], float(w[-1]), b, threshold, probe, vector / np.linalg.norm(vector))


def rates(model, rows: list[tuple[str, int]]) -> dict:
    """Personal questions found and general ones called personal (``model``: a frame model, or a
    ``PersonalQuestions``)."""
    asks = model.asks_about_self if isinstance(model, PersonalQuestions) else \
        (lambda q: is_question(mask_quotes(q)) and model.is_claim(mask_quotes(q)))
    said = [(asks(q), y, q) for q, y in rows]  # as asked
    personal = [s for s in said if s[1]]
    general = [s for s in said if not s[1]]
    return {"personal": len(personal), "personal_found": round(sum(s[0] for s in personal) / max(1, len(personal)), 3),
            "general": len(general), "general_called_personal": round(sum(s[0] for s in general) / max(1, len(general)), 3),
            "missed": [q for got, y, q in personal if not got][:6], "wrongly": [q for got, y, q in general if got][:6]}


def _share(says, questions: list[str]) -> float:
    """The share of ``questions`` (quotations masked) that ``says`` says yes to."""
    return round(float(np.mean([says(mask_quotes(q)) for q in questions])), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help=f"fit again and write {MODEL_PATH.relative_to(ROOT)}")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    rows = training_rows()
    model = personal_model() if not args.fit else fit(rows)
    values = value_model() if not args.fit else fit_value(value_rows())
    embed = default_embedder().encode
    vectors = personal_vectors.shipped_model() if not args.fit else fit_vectors(rows, embed)
    if args.fit:
        for path, fitted in ((MODEL_PATH, model), (VALUE_MODEL_PATH, values), (VECTORS_PATH, vectors)):
            path.write_text(json.dumps({"about": ["Written by benchmarks/personal_questions.py --fit."],
                                        **fitted.to_json()}, indent=0, sort_keys=True) + "\n", encoding="utf-8")
        claims_module.shipped_model.cache_clear()
        personal_vectors.shipped_model.cache_clear()
    rng = random.Random(1)
    result = {"threshold": model.threshold, "features": len(model.weights), "train": rates(model, rows),
              "check_written": rates(model, written_rows("personal_check"))}
    for name in ("phrasing_heldout", "kinds_heldout"):
        held, implicit = phrasing_rows(name, rng)
        result[name] = rates(model, held)
        result[name]["implicit_called_personal"] = round(float(np.mean([is_question(q) and model.is_claim(q)
                                                                        for q in implicit])), 3)
    reader = PersonalQuestions(embed, vectors)
    rng = random.Random(1)
    written = _load("personal_check")
    result["vectors"] = {"threshold": vectors.threshold if vectors else None,
                         "check_written": rates(reader, written_rows("personal_check")),
                         # the check's advice in the asker's own voice: general, and no value asked for
                         "check_advice_called_personal": _share(reader.asks_about_self, written["advice"])}
    for name in ("phrasing_heldout", "kinds_heldout"):
        held, implicit = phrasing_rows(name, rng)
        result["vectors"][name] = rates(reader, held)
        result["vectors"][name]["implicit_called_personal"] = round(float(np.mean(
            [reader.asks_about_self(q) for q in implicit])), 3)
    result["value_questions"] = {
        "threshold": values.threshold,
        **{name: value_rates(values, name, random.Random(1)) for name in ("phrasing_heldout", "kinds_heldout")},
        "check_general_called_value": _share(values.is_claim, written["general"]),
        "check_personal_kept": _share(values.is_claim, written["personal"]),
        "check_advice_called_value": _share(values.is_claim, written["advice"])}
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
