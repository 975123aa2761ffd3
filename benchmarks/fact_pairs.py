"""The pair bank (``retrieval.fact_pairs``): which fact a message needs, from labelled messages. Writes it, chooses
its threshold and measures what it adds to the fact model.

The bank: every explicit and implicit question of the tuning phrasing sets (tuning, dev, dev2) and of the
development kinds (``kinds_dev.json``), each with its kind's statements (values drawn as the generator draws
them), and their general questions, which need no fact. Measured on the conversations ``standing_facts.py``
fits on: at each question, its conversation's current facts, the fact model's probability for its best match, and
each fact's pair score. A question is *given its fact* when the fact model's best clears its threshold and
answers it, or, below that threshold, when the best pair score clears the bank's and that fact answers it; a
general, never-said or LoCoMo question no fact answers *gets a fact* when either fires. A set of the bank is
scored with its own messages left out (the held-out sets and LoCoMo with the whole bank): its figures are what a
phrasing the bank has never seen gets. The threshold is the lowest at which the bank gives a fact to at most
``--rate`` of the development sets' general and never-said questions that the fact model does not.

    .venv/bin/python benchmarks/fact_pairs.py [--fit] [--quick] [--json FILE]

``--fit`` writes ``localpager/retrieval/data/fact_pairs.json`` and ``fact_pairs.npy``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from standing_facts import THRESHOLD_SPLITS, asked_with_facts, load_sets  # noqa: E402

from localpager.core.answer_types import asks_when_past  # noqa: E402
from localpager.core.personal import asks_for_value  # noqa: E402
from localpager.lab.synthetic import VALUE_MAKERS, fact_kinds, general_questions, set_kinds  # noqa: E402
from localpager.retrieval import fact_pairs  # noqa: E402
from localpager.retrieval.embedder import default_embedder  # noqa: E402
from localpager.retrieval.facts import DEFAULT_FACT_MODEL, best_match  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "localpager" / "retrieval" / "data"
# The bank's sources, by the split names of ``standing_facts.load_sets``
SOURCES = {"tuning": "tuning", "dev": "dev", "dev2": "dev2", "dev-kinds": None}
K, POWER = 5, 4.0  # neighbours read, and how sharply the nearest count (chosen on dev with dev left out)
VALUES_PER_STATEMENT = 2


def bank_records(seed: int = 0) -> tuple[list[tuple[str, int | None]], list[list[str]], list[str]]:
    """The bank's messages (text, the index of their fact's statements or None), its statement groups, and each
    message's source split."""
    rng = random.Random(seed)
    messages: list[tuple[str, int | None]] = []
    groups: list[list[str]] = []
    origin: list[str] = []
    seen: set[str] = set()
    for split, phrasing in SOURCES.items():
        kinds = fact_kinds(phrasing) if phrasing else set_kinds("dev")
        general = general_questions(phrasing) if phrasing else _dev_general()
        for kind in kinds:
            maker = VALUE_MAKERS[str(kind.value[0])]
            said = []
            for template in (*kind.says, *kind.updates):
                for _ in range(VALUES_PER_STATEMENT):
                    said.append(template.format(**maker(rng, *kind.value[1:]).slots))
            groups.append(sorted(set(said)))
            for question in (*kind.asks, *kind.implicit):
                if question not in seen:
                    seen.add(question)
                    messages.append((question, len(groups) - 1))
                    origin.append(split)
        for question in general:
            if question not in seen:
                seen.add(question)
                messages.append((question, None))
                origin.append(split)
    return messages, groups, origin


def _dev_general() -> tuple[str, ...]:
    from localpager.lab.synthetic_data import kind_set
    return kind_set("dev")[2]


@dataclass
class Case:
    split: str
    dataset: str
    kind: str
    probability: float  # the fact model's, for its best match
    right_best: bool  # that best match answers the question
    pair_best: float  # the best pair score
    right_pair: bool  # the fact with the best pair score answers it
    answerable: bool
    need: bool  # it asks for the speaker's own sake and not when something happened: the messages the bank reads
    needed: float  # ``PairBank.need_of``: the share of its nearest labelled messages that needed a fact ...
    nearest: float  # ... and the nearest one's cosine
    value: bool  # it asks for something told (``core.personal.asks_for_value``): "not remembered" may answer it


def build_cases(sets: dict, embedder, bank: fact_pairs.PairBank, origin: np.ndarray) -> list[Case]:
    """One case a question, as ``standing_facts.build_cases`` reads them, with the bank's scores: a generated set
    the bank holds is scored with its own messages (``origin``: each message's set) left out."""
    cases = []
    for dataset, split, probe, facts, kind, answering in asked_with_facts(sets):
        leave_out = origin == split if split in SOURCES and dataset == "generated" else None
        best, features, vectors, message = best_match(probe.question, facts, embedder.encode)[:4]
        unit = message / np.linalg.norm(message)
        scores = bank.scores(unit, vectors, leave_out)
        top = int(np.argmax(scores))
        cases.append(Case(split, dataset, kind, DEFAULT_FACT_MODEL.probability(features),
                          facts[best].fact_id in answering, float(scores[top]),
                          facts[top].fact_id in answering, bool(answering),
                          bool(features.need) and not asks_when_past(probe.question),
                          *bank.need_of(unit, leave_out), asks_for_value(probe.question)))
    return cases


def choose_threshold(cases: list[Case], rate: float) -> float:
    """The lowest threshold at which the bank gives a fact to at most ``rate`` of the development sets' general
    and never-said questions the fact model gives none."""
    scores = np.sort([c.pair_best for c in cases if c.split in THRESHOLD_SPLITS and c.kind in ("general", "absent")
                      and c.need and c.probability < DEFAULT_FACT_MODEL.threshold] or [0.0])
    return round(float(scores[int(np.ceil((1 - rate) * len(scores))) - 1]) + 1e-4, 4)


def unmet(c: Case, threshold: float, cut: dict[str, float]) -> bool:
    """The bank calls the question one about something never told (``PairBank.unmet_by``): it reads it, the
    question asks for something told, and neither the fact model nor the bank gives it a fact."""
    return (c.need and c.value and c.probability < DEFAULT_FACT_MODEL.threshold and c.pair_best < threshold
            and fact_pairs.unmet_by(cut, c.needed, c.nearest, c.pair_best, c.probability))


def choose_unmet(cases: list[Case], threshold: float, rate: float) -> dict[str, float]:
    """The cut-offs of ``PairBank.unmet``: of those that call at most ``rate`` of the development sets' fact
    questions unmet (their fact current, or found by no extraction: a recall may still answer those), the ones
    that call the most of their never-said questions so."""
    dev = [c for c in cases if c.split in THRESHOLD_SPLITS and c.dataset == "generated"]
    told = [c for c in dev if c.kind in ("explicit", "implicit")]
    never = [c for c in dev if c.kind == "absent"]
    best, chosen = (-1, 0), {}
    for needed in (0.6, 0.8, 0.95):
        for nearest in (0.5, 0.6, 0.7, 0.8):
            for paired in np.round(np.arange(0.1, threshold, 0.05), 3):
                for probability in (0.2, 0.3, DEFAULT_FACT_MODEL.threshold):
                    cut = {"needed": needed, "nearest": nearest, "paired": float(paired), "probability": probability}
                    wrong = sum(unmet(c, threshold, cut) for c in told)
                    if wrong > rate * len(told):
                        continue
                    caught = (sum(unmet(c, threshold, cut) for c in never), -wrong)
                    if caught > best:
                        best, chosen = caught, cut
    return chosen


def unmet_rates(cases: list[Case], threshold: float, cut: dict[str, float]) -> dict:
    """Per generated set and kind: the share of questions called unmet (a fact question whose fact no extraction
    found is counted apart: only a recall could answer it)."""
    out = defaultdict(list)
    for c in cases:
        if c.dataset == "generated":
            gone = "" if c.answerable or c.kind in ("general", "absent") else " (its fact not found)"
            out[f"{c.split}/{c.kind}{gone}"].append(float(unmet(c, threshold, cut)))
    return {k: {"n": len(v), "rate": round(float(np.mean(v)), 3)} for k, v in sorted(out.items())}


def rates(cases: list[Case], threshold: float | None) -> dict:
    """Per set and kind: questions a fact answers given it; the others given any (``threshold`` None: the fact
    model alone)."""
    out = defaultdict(list)
    for c in cases:
        by_model = c.probability >= DEFAULT_FACT_MODEL.threshold
        by_pairs = not by_model and c.need and threshold is not None and c.pair_best >= threshold
        kind = c.kind if c.kind != "locomo" else ("locomo (a fact answers)" if c.answerable else "locomo (none does)")
        if c.answerable:
            given = (by_model and c.right_best) or (by_pairs and c.right_pair)
            out[f"{c.dataset}/{c.split}/{kind}"].append(float(given))
        else:
            out[f"{c.dataset}/{c.split}/{kind}"].append(float(by_model or by_pairs))
    return {k: {"n": len(v), "rate": round(float(np.mean(v)), 3)} for k, v in sorted(out.items())}


def write(messages, groups, vectors: np.ndarray, threshold: float, cut: dict[str, float]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    data = {"about": ["Written by benchmarks/fact_pairs.py --fit: labelled messages, the index of the statements of "
                      "the fact each needs (null: a general question), and the statements; the vectors, in this "
                      "order, are in fact_pairs.npy (all-MiniLM-L6-v2, int8)."],
            "k": K, "power": POWER, "threshold": threshold, "unmet": cut, "messages": messages, "statements": groups}
    (OUT / fact_pairs.BANK_FILE).write_text(json.dumps(data, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
    np.save(OUT / fact_pairs.VECTORS_FILE, vectors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="write the bank and its threshold into the package")
    parser.add_argument("--quick", action="store_true", help="6 generated and 2 LoCoMo conversations a split")
    parser.add_argument("--rate", type=float, default=0.01,
                        help="the share of dev general and never-said questions the bank may give a fact")
    parser.add_argument("--unmet-rate", type=float, default=0.01,
                        help="the share of dev fact questions the bank may call never told")
    parser.add_argument("--json", type=Path, help="write every number to this file")
    args = parser.parse_args()
    started = time.perf_counter()
    embedder = default_embedder()
    messages, groups, origin = bank_records()
    texts = [m for m, _ in messages] + [s for g in groups for s in g]
    vectors = fact_pairs.quantized(np.asarray(embedder.encode(texts), dtype=np.float32))
    bank = fact_pairs.bank_from({"messages": messages, "statements": groups, "k": K, "power": POWER,
                                 "threshold": 1.0}, vectors)
    cases = build_cases(load_sets(args.quick), embedder, bank, np.array(origin))
    threshold = choose_threshold(cases, args.rate)
    shipped = fact_pairs.shipped_bank()
    alone, fitted = rates(cases, None), rates(cases, threshold)
    now = rates(cases, shipped.threshold) if shipped is not None else alone
    print(f"{len(messages)} messages ({sum(n is None for _, n in messages)} general), {len(groups)} facts' statements; "
          f"threshold {threshold} (shipped: {shipped.threshold if shipped else 'none'})\n")
    print("| set/kind | n | fact model alone | with the bank (fitted now) | shipped |\n|---|---:|---:|---:|---:|")
    for key in fitted:
        print(f"| {key} | {fitted[key]['n']} | {alone[key]['rate']:.2f} | {fitted[key]['rate']:.2f} | "
              f"{now[key]['rate']:.2f} |")
    cut = choose_unmet(cases, threshold, args.unmet_rate)
    never, shipped_never = unmet_rates(cases, threshold, cut), unmet_rates(cases, threshold, shipped.unmet if shipped
                                                                            else {})
    print(f"\n## Never told: questions that need a fact nothing meets, answered \"not remembered\" (cut-offs {cut}; "
          f"shipped: {shipped.unmet if shipped else 'none'})\n")
    print("| set/kind | n | fitted now | shipped |\n|---|---:|---:|---:|")
    for key, r in never.items():
        print(f"| {key} | {r['n']} | {r['rate']:.2f} | {shipped_never[key]['rate']:.2f} |")
    if args.fit:
        write(messages, groups, vectors, threshold, cut)
        print(f"\nwrote {OUT / fact_pairs.BANK_FILE} and {fact_pairs.VECTORS_FILE}")
    if args.json:
        args.json.write_text(json.dumps({"threshold": threshold, "alone": alone, "fitted": fitted, "shipped": now,
                                         "unmet": cut, "never_told": never, "never_told_shipped": shipped_never,
                                         "seconds": round(time.perf_counter() - started, 1)}, indent=1))


if __name__ == "__main__":
    main()
