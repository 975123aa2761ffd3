"""The supersession model (``core.supersede``): fitted on pairs of standing facts of generated conversations, measured
on the held-out splits of ``heldout_kinds.py`` it never saw.

Training pairs (generated conversations only: the tuning, dev and dev2 phrasings of the trained kinds, seeds
``FIT_SEEDS``, apart from the measured 0, 100 and 300; never the held-out phrasing or kinds): every (newer, older)
pair of one conversation's facts that ``facts.CurrentFacts`` would compare (they share a slot or head word), labelled
1 when both are statements of one planted fact (a correction and what it corrects); and, since a generated
conversation plants one fact of each type, pairs across conversations: a correction against the first statement of
another conversation's fact of the same type or extracted kind, labelled 1 when it is the same kind of fact (the
laptop's budget) and 0 when not (the trip's budget, the accountant against the plumber): two different things of
one kind that must not replace each other. The threshold is the lowest at which at most ``MAX_WRONG`` of the
training pairs of different things are taken: a wrong replacement hides a fact that still stands, a missed one
leaves both values standing (and the newer is shown first).

    .venv/bin/python benchmarks/supersede.py          # measure the shipped model (heldout_kinds.py's extraction)
    .venv/bin/python benchmarks/supersede.py --fit    # fit it again and write localpager/core/data/supersede_model.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parent.parent
FIT_SEEDS = {"tuning": 1000, "dev": 2000, "dev2": 3000}  # phrasing -> seed
FIT_CONVERSATIONS = 60  # a phrasing
CROSS_PER_CORRECTION = 8  # statements of other conversations each correction is paired with
MAX_WRONG = 0.02
L2 = 1.0
DENSE_MAX_WRONG = 0.0025  # the read-time model replaces the one fact an answer shows: chosen on the tuning splits


def _planted(conv) -> dict[int, str]:
    """Each planted statement's turn -> the kind of fact it states (``FactKind.name``)."""
    from heldout_kinds import fact_probes

    return {i: p.extra["kind"] for p in fact_probes(conv, explicit_only=True) for i in p.extra["stated"]}


def _drafts(conv) -> list[tuple[int, object]]:
    from localpager.core.facts import extract

    return [(t.index, d) for t in conv.turns for d in extract(t)]


def _pair(new, old) -> dict[str, float]:
    from localpager.core.supersede import pair_features, shape

    return pair_features(shape(new.kind, new.subject, new.text), shape(old.kind, old.subject, old.text))


def compared(new, old) -> bool:
    """Whether ``facts.supersedes`` asks the model about the two: the same speaker, a word of their keys shared,
    and not already one slot by the written rule (``facts._by_slot``)."""
    from localpager.core.facts import _by_slot
    from localpager.core.supersede import shape

    return (new.speaker == old.speaker and bool(shape(new.kind, new.subject, new.text).keys
                                                & shape(old.kind, old.subject, old.text).keys)
            and not _by_slot(new, old))


def within(conv) -> list[tuple[dict[str, float], int]]:
    """A conversation's compared (newer, older) pairs: 1 for two statements of one planted fact."""
    planted, drafts = _planted(conv), _drafts(conv)
    rows = []
    for j, (tj, new) in enumerate(drafts):
        for ti, old in drafts[:j]:
            if ti != tj and compared(new, old):
                rows.append((_pair(new, old), int(ti in planted and planted.get(tj) == planted[ti])))
    return rows


def across_pairs(convs: list, rng: random.Random) -> list[tuple[object, object, int]]:
    """Corrections against first statements of other conversations' facts of the same type or extracted kind, as
    (newer, older, label) drafts: 1 for the same kind of fact, 0 for another (two things of one kind)."""
    from heldout_kinds import fact_probes
    from localpager.core.facts import extract

    firsts, corrections = [], []
    for conv in convs:
        for p in fact_probes(conv, explicit_only=True):
            for k, i in enumerate(p.extra["stated"]):
                found = extract(conv.turns[i])
                if found:
                    (corrections if k else firsts).append((conv.id, p.type, p.extra["kind"], found))
    pairs = []
    for conv_id, kind_type, name, news in corrections:
        pool = [f for f in firsts if f[0] != conv_id and (f[1] == kind_type or f[3][0].kind == news[0].kind)]
        for _, _, other, olds in rng.sample(pool, min(CROSS_PER_CORRECTION, len(pool))):
            pairs += [(new, old, int(other == name)) for new in news for old in olds]
    return pairs


def across(convs: list, rng: random.Random) -> list[tuple[dict[str, float], int]]:
    """``across_pairs`` that ``facts.supersedes`` compares, as feature rows."""
    return [(_pair(new, old), label) for new, old, label in across_pairs(convs, rng) if compared(new, old)]


def training_rows() -> list[tuple[dict[str, float], int]]:
    from localpager.lab.synthetic import generate_dataset

    rows: list[tuple[dict[str, float], int]] = []
    rng = random.Random(38)
    for phrasing, seed in FIT_SEEDS.items():
        convs = generate_dataset(FIT_CONVERSATIONS, questions="both", absent=4, seed=seed, phrasing=phrasing)
        rows += [r for conv in convs for r in within(conv)] + across(convs, rng)
    return rows


def fit() -> dict:
    """Fit the model on ``training_rows`` and write it; returns its rates on them."""
    from localpager.core.supersede import MODEL_FILE

    return fit_and_write(training_rows(), MAX_WRONG, MODEL_FILE, "--fit")


def fit_and_write(rows: list[tuple[dict[str, float], int]], max_wrong: float, file: str, option: str) -> dict:
    """A ``SupersedeModel`` fitted on ``rows`` (the two labels weighing the same), its threshold the lowest at which
    at most ``max_wrong`` of the pairs of different things are taken, written to ``core/data/FILE``; its rates."""
    from localpager.core.supersede import SupersedeModel
    from localpager.lab.fitting import fit_logistic

    names = list(rows[0][0])
    x = np.array([[f[n] for n in names] for f, _ in rows])
    y = np.array([label for _, label in rows], dtype=float)
    weight = np.where(y == 1, 0.5 / y.sum(), 0.5 / (len(y) - y.sum())) * len(y)
    beta, mean, scale = fit_logistic(x, y, weight, L2)
    p = 1 / (1 + np.exp(-(beta[0] + ((x - mean) / scale) @ beta[1:])))
    wrong = np.sort(p[y == 0])[::-1]
    threshold = float(wrong[int(max_wrong * len(wrong))]) + 1e-4
    model = SupersedeModel(weights=dict(zip(names, beta[1:].round(4).tolist())), bias=round(float(beta[0]), 4),
                           means=dict(zip(names, mean.round(4).tolist())),
                           scales=dict(zip(names, scale.round(4).tolist())), threshold=round(threshold, 4))
    rates = {"pairs": len(rows), "same_fact": int(y.sum()), "taken_same": round(float(np.mean(p[y == 1] >= threshold)), 3),
             "taken_different": round(float(np.mean(p[y == 0] >= threshold)), 3)}
    data = {"about": [f"Written by benchmarks/supersede.py {option}.", json.dumps(rates)], **model.to_json()}
    (ROOT / "localpager" / "core" / "data" / file).write_text(json.dumps(data, indent=0) + "\n")
    return rates


def dense_rows(embed) -> list[tuple[dict[str, float], int]]:
    """The read-time model's pairs: as ``training_rows``, but every (newer, older) pair of one speaker, shared
    words or not (two current facts the fact ranking meets), each with its two vectors' cosine."""
    from localpager.core.supersede import dense_pair_features, shape
    from localpager.lab.synthetic import generate_dataset

    pairs: list[tuple[object, object, int]] = []
    rng = random.Random(38)
    for phrasing, seed in FIT_SEEDS.items():
        convs = generate_dataset(FIT_CONVERSATIONS, questions="both", absent=4, seed=seed, phrasing=phrasing)
        for conv in convs:
            planted, drafts = _planted(conv), _drafts(conv)
            pairs += [(new, old, int(ti in planted and planted.get(tj) == planted[ti]))
                      for j, (tj, new) in enumerate(drafts) for ti, old in drafts[:j]
                      if ti != tj and new.speaker == old.speaker]
        pairs += across_pairs(convs, rng)
    texts = sorted({d.text for new, old, _ in pairs for d in (new, old)})
    vectors = dict(zip(texts, embed(texts)))
    return [(dense_pair_features(shape(new.kind, new.subject, new.text), shape(old.kind, old.subject, old.text),
                                 float(vectors[new.text] @ vectors[old.text])), label) for new, old, label in pairs]


def fit_dense(max_wrong: float) -> dict:
    """Fit the read-time model (``supersede.dense_model``) on ``dense_rows`` and write it."""
    from localpager.core.supersede import DENSE_MODEL_FILE
    from localpager.retrieval.embedder import default_embedder

    return fit_and_write(dense_rows(default_embedder().encode), max_wrong, DENSE_MODEL_FILE, "--fit-dense")


def measure(n: int) -> dict:
    """``heldout_kinds.extraction`` on each split (no model but this one)."""
    from heldout_kinds import extraction, load_sets

    keys = ("corrected", "newest_value", "old_value_superseded", "both_extracted", "newest_value_both_extracted",
            "wrong_replacements", "filler_replaced")
    return {name: {k: r[k] for k in keys} for name, r in ((s, extraction(c)) for s, c in load_sets(n).items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="fit the model again and write it")
    parser.add_argument("--fit-dense", action="store_true",
                        help="fit the read-time model (with the facts' cosine) again and write it")
    parser.add_argument("--dense-wrong", type=float, default=DENSE_MAX_WRONG,
                        help="the share of pairs of different things the read-time model may take")
    parser.add_argument("--n", type=int, default=20, help="conversations a measured split")
    args = parser.parse_args()
    out = {"fit": fit()} if args.fit else {}
    if args.fit_dense:
        out["fit_dense"] = fit_dense(args.dense_wrong)
        print(json.dumps(out["fit_dense"]))
        return
    if args.fit:
        from localpager.core import supersede

        supersede.default_model.cache_clear()
    out["measured"] = measure(args.n)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
