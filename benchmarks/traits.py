"""The trait, habit, result and request models (``core.traits``, ``core.requests``): fitted on labelled sentences,
measured on sentences they never saw.

The trait model is fitted on ``lab/data/traits_train.json`` (a speaker describing themselves with "be": lasting,
against passing states in the same frame), the habit model on ``lab/data/habits_train.json`` (a speaker telling
what they do in the plain present: habits, against remarks, wants and passing states), the result model on
``lab/data/results_train.json`` (what they did, told in the past: a result that lasts, against events that only
happened). One row per sentence with a description (``syntax.self_description``, ``syntax.habit_description``,
``syntax.result_description``), read as its first word's vector and its words' sum (``traits.features``). The threshold is the lowest at which, out of fold, at most
``MAX_PASSING_LASTING`` of the passing states read as lasting: a mood kept as a fact would answer later questions, a
lasting one missed is still on its page. Measured, never tuned on: ``lab/data/traits_check.json`` (written apart,
other words) and the held-out phrasing set's statements that describe their speaker (all facts). The request model
is fitted on ``lab/data/requests_train.json`` (a request before a colon whose words after it are the user's own,
against one handing over a text to work on), read from the request's words (``syntax.request_words``), and
measured on ``requests_check.json``, alone and as the extractor reads its sentences (``check_extracted``).

    .venv/bin/python benchmarks/traits.py          # measure the shipped model
    .venv/bin/python benchmarks/traits.py --fit    # fit all again: core/data/{trait,habit,result,request}_model.json
"""

from __future__ import annotations

import json
import sys
import zlib

import numpy as np

from claims import DATA, ROOT, arguments, report, write_model
from hedges import firm_statements
from localpager.core import requests as requests_module
from localpager.core.facts import extract
from localpager.core.records import Turn
from localpager.core.requests import head_request
from localpager.core.syntax import habit_description, result_description, self_description, warm
from localpager.core.traits import (HABIT_FILE, MODEL_FILE, RESULT_FILE, TraitModel, description, features,
                                    habit_model, result_model, shipped_model)
from localpager.core.word_vectors import default_vectors
from localpager.lab.fitting import fit_out_of_fold, threshold_above

MODEL_PATH = ROOT / "localpager" / "core" / "data" / MODEL_FILE
HABIT_PATH = MODEL_PATH.with_name(HABIT_FILE)
REQUEST_PATH = MODEL_PATH.with_name(requests_module.MODEL_FILE)
RESULT_PATH = MODEL_PATH.with_name(RESULT_FILE)
MAX_PASSING_LASTING = 0.02
L2 = 10.0  # the word vectors have 384 dimensions and the sentences number a few hundred


def rows(name: str, yes: str = "lasting", no: str = "passing") -> list[tuple[str, int]]:
    """(sentence, 1 if what it says the speaker is or does lasts) of a traits or habits file; of a requests file
    (``yes`` "own", ``no`` "text"), 1 if the words after its colon are the user's own."""
    data = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    return [(s, 1) for s in data[yes]] + [(s, 0) for s in data[no]]


def requests(name: str) -> list[tuple[str, int]]:
    """The rows of a requests file."""
    return rows(name, "own", "text")


def extracted(data: list[tuple[str, int]]) -> dict:
    """Of a requests file's sentences as the extractor reads them (a chat user's): the share of those giving the
    user's own words that gave a fact, and of those handing over a text that gave one."""
    own = [s for s, label in data if label]
    text = [s for s, label in data if not label]
    told = [s for s in own if extract(Turn(role="user", text=s, index=0))]
    taken = [s for s in text if extract(Turn(role="user", text=s, index=0))]
    return {"own_fact": round(len(told) / max(1, len(own)), 3), "text_fact": round(len(taken) / max(1, len(text)), 3),
            "own_missed": [s for s in own if s not in told][:10], "text_taken": taken[:10]}


def fit(train: list[tuple[str, int]], describe=self_description, folds: int = 5) -> TraitModel:
    """The model on the descriptions (``describe``) of ``train``'s sentences, its threshold the lowest at which at most
    ``MAX_PASSING_LASTING`` of the passing ones read as lasting out of fold; the folds split by description."""
    vectors = default_vectors()
    found = [(d, label) for text, label in train if (d := describe(text))]
    x = np.array([features(d, vectors) for d, _ in found], dtype=np.float64)
    y = np.array([label for _, label in found], dtype=np.float64)
    fold = np.array([zlib.crc32(d.lower().encode()) % folds for d, _ in found])
    weights, bias, held = fit_out_of_fold(x, y, fold, L2)
    threshold = threshold_above(held[y == 0], MAX_PASSING_LASTING, floor=0.5)
    return TraitModel(weights.astype(np.float32), round(bias, 6), round(threshold, 4))


def scores(model: TraitModel, data: list[tuple[str, int]], describe=description, examples: bool = True) -> dict:
    """Lasting descriptions found, passing ones read as lasting, and the sentences no description was read of
    (``describe``: as the extractor reads them, ``traits.description`` or ``syntax.habit_description``)."""
    lasting = [s for s, label in data if label]
    passing = [s for s, label in data if not label]
    found = [s for s in lasting if model.lasts(describe(s))]
    wrong = [s for s in passing if model.lasts(describe(s))]
    result = {"lasting": len(lasting), "lasting_found": round(len(found) / max(1, len(lasting)), 3),
              "passing": len(passing), "passing_read_lasting": round(len(wrong) / max(1, len(passing)), 3),
              "no_description": sum(1 for s, _ in data if describe(s) is None)}
    if examples:
        result["missed"] = [s for s in lasting if s not in found][:10]
        result["passing_kept"] = wrong[:10]
    return result


# Each model: the stem of its training and check files (``lab/data/<name>_train.json``), the reading it is fitted
# on and the one it is measured by (the trait model's as the extractor reads, ``traits.description``: only where the
# speaker and "be" stand side by side), the file it is written to and the shipped model's loader (its cache cleared
# after a fit).
MODELS = (("traits", self_description, description, MODEL_PATH, shipped_model),
          ("habits", habit_description, habit_description, HABIT_PATH, habit_model),
          ("results", result_description, result_description, RESULT_PATH, result_model),
          ("requests", head_request, head_request, REQUEST_PATH, requests_module.shipped_model))


def labelled(name: str, part: str) -> list[tuple[str, int]]:
    """The rows of ``lab/data/<name>_<part>.json``: a requests file labels "own" and "text"."""
    return requests(f"{name}_{part}") if name == "requests" else rows(f"{name}_{part}")


def main() -> None:
    args = arguments(__doc__, MODEL_PATH)
    warm()
    figures, models = {}, {}
    for name, reading, measured, path, shipped in MODELS:
        train = labelled(name, "train")
        model = models[name] = fit(train, reading) if args.fit else shipped()
        if args.fit:
            write_model(path, model.to_json(), "traits.py")
            shipped.cache_clear()
        figures[name] = {"threshold": model.threshold, "train": scores(model, train, measured),
                         "check": scores(model, labelled(name, "check"), measured)}
    described = [(s, 1) for s, _ in firm_statements(("heldout",)) if description(s)]
    figures["traits"]["heldout_phrasing_descriptions"] = scores(models["traits"], described, examples=False)
    figures["requests"]["check_extracted"] = extracted(labelled("requests", "check"))
    report(figures, args.json)

if __name__ == "__main__":
    sys.exit(main())
