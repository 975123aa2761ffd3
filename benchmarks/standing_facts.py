"""Standing facts: how well the extractor finds them, and the fact model that decides which bear on a message.

1. Extraction (``core.facts``) on single statements: ``lab/data/statements_dev.json`` (read while the
   extractor was written: development) and ``statements_heldout.json`` (written later and apart, never tuned
   on), and the same pair for a chat user's plain present (``statements_plain_dev.json``, ``_check``): recall and precision of "this sentence states a durable fact", for a chat's user and a transcript's
   speakers; and on generated conversations: the planted statements found (recall), the filler turns taken for
   facts, and the corrections that supersede the fact they correct.
2. The fact model (``retrieval.facts``): generated conversations of every phrasing set with an explicit and an
   implicit probe per planted fact, the general questions, and questions about kinds never planted
   (``--absent``); and LoCoMo's questions. At each question's point, the conversation's standing facts as the
   store has them then (``core.facts.facts_of``), each scored against it with the real embedder. A question
   is *given its fact* when its best-matching fact clears the threshold and is its evidence's; a general or
   never-said question, or a LoCoMo question no fact answers, *gets a fact* when its best match clears it.
   Fitted on tuning, dev and dev2, the development kinds (``kinds_dev.json``: kinds no cue names, so that what
   bears on a message is learned beyond the generator's own kinds) and LoCoMo 1-5; the threshold is the lowest
   at which at most 5% of the dev sets' general and never-said questions get a fact (``--general-rate``). Held
   out: the held-out phrasings, the held-out kinds and LoCoMo 6-10, reported, never used.

    .venv/bin/python benchmarks/standing_facts.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from localpager.core.facts import extract, facts_of
from localpager.core.records import ABSENT_PROBE, GENERAL_PROBE, Transcript, Turn
from localpager.lab.fitting import fit_model, model_source, probabilities
from localpager.lab.synthetic import generate_dataset
from localpager.retrieval.embedder import default_embedder
from localpager.retrieval.facts import DEFAULT_FACT_MODEL, FACT_FEATURES, best_match
from localpager.store.loaders import load_conversations

DATA = Path(__file__).resolve().parents[1] / "localpager" / "lab" / "data"
LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"
SPLITS = ("tuning", "dev", "dev2", "dev-kinds", "held-out", "held-out-kinds")
FITTED = ("tuning", "dev", "dev2", "dev-kinds")
THRESHOLD_SPLITS = ("dev", "dev2", "dev-kinds")
# sentences written by hand, development and held out: ``statements_*`` in general, ``statements_plain_*`` a chat
# user's plain present ("I bank with Monzo." against "I take your point."; ``facts.habitual_fact``)
STATEMENT_SETS = ("statements_dev", "statements_heldout", "statements_plain_dev", "statements_plain_check")


# -- 1. extraction --------------------------------------------------------------------------------------
def statement_scores(path: Path) -> dict:
    data = json.loads(path.read_text(encoding="utf-8"))
    out = {}
    for section in ("chat", "transcript"):
        if section not in data:
            continue
        tp = fp = fn = kind = 0
        for item in data[section]:
            found = extract(Turn("user", item["text"], 0, speaker=item.get("speaker")))
            if item["fact"]:
                tp, fn = tp + bool(found), fn + (not found)
                kind += bool(found) and found[0].kind == item["kind"]
            else:
                fp += bool(found)
        judged = any(item["kind"] for item in data[section])  # a set may not name kinds (``statements_plain_*``)
        out[section] = {"facts": tp + fn, "others": len(data[section]) - tp - fn, "recall": round(tp / (tp + fn), 3),
                        "precision": round(tp / max(1, tp + fp), 3),
                        "kind": round(kind / max(1, tp), 3) if judged else None,
                        "false_facts": round(fp / max(1, len(data[section]) - tp - fn), 3)}
    return out


def planted_scores(convs: list[Transcript]) -> dict:
    """Planted statements found, filler user turns taken for facts, corrections that supersede."""
    found = planted = taken = filler = superseded = corrections = 0
    for conv in convs:
        stated = {i for p in conv.probes for i in p.extra.get("stated", p.evidence)}
        for turn in conv.turns:
            if turn.role != "user":
                continue
            hit = bool(extract(turn))
            if turn.index in stated:
                planted, found = planted + 1, found + hit
            else:
                filler, taken = filler + 1, taken + hit
        facts = facts_of(conv.turns)
        for probe in conv.probes:
            if probe.extra.get("old_answers") and probe.extra.get("style") != "implicit":
                corrections += 1
                new = [f for f in facts if f.turn == probe.evidence[-1]]
                superseded += any(old.superseded_by == f.fact_id for f in new for old in facts)
    return {"planted": planted, "found": round(found / max(1, planted), 3), "filler": filler,
            "filler_taken": round(taken / max(1, filler), 3), "corrections": corrections,
            "superseded": round(superseded / max(1, corrections), 3)}


# -- 2. the fact model ----------------------------------------------------------------------------------
@dataclass
class Case:
    split: str
    dataset: str
    kind: str  # explicit, implicit, general, absent, locomo, locomo-5
    message: str
    right: bool  # the best-matching fact is one that answers it
    answerable: bool  # some current fact answers it
    x: np.ndarray = field(default_factory=lambda: np.zeros(len(FACT_FEATURES)))


def kind_of(probe) -> str:
    if probe.type in (GENERAL_PROBE, ABSENT_PROBE):
        return "general" if probe.type == GENERAL_PROBE else "absent"
    if "category" in probe.extra:
        return "locomo-5" if probe.extra["category"] == 5 else "locomo"
    return probe.extra.get("style", "explicit")


def asked_with_facts(sets: dict) -> Iterator[tuple[str, str, object, list, str, set[int]]]:
    """Each question of ``sets`` whose conversation has current standing facts at its point: its dataset, split,
    probe, those facts, its kind (``kind_of``) and the ids of the facts that answer it."""
    for (dataset, split), convs in sets.items():
        for conv in convs:
            for probe in conv.probes:
                at = len(conv.turns) - 1 if probe.at is None else probe.at
                facts = [f for f in facts_of(conv.turns[: at + 1]) if f.current]
                if not facts:
                    continue
                kind = kind_of(probe)
                answering = {f.fact_id for f in facts if f.turn in probe.evidence} if kind not in (
                    "general", "absent", "locomo-5") else set()
                yield dataset, split, probe, facts, kind, answering


def build_cases(sets: dict, embedder) -> list[Case]:
    """One case a question: its conversation's current standing facts at its point, the best match and the
    features the model reads of it (``retrieval.facts.best_match``, as the product computes them)."""
    cases = []
    for dataset, split, probe, facts, kind, answering in asked_with_facts(sets):
        best, features = best_match(probe.question, facts, embedder.encode)[:2]
        cases.append(Case(split, dataset, kind, probe.question, facts[best].fact_id in answering,
                          bool(answering), np.array(features.vector())))
    return cases


def fit(cases: list[Case], rate: float):
    """The fact model on the fitted splits, each group (dataset, split, kind, right or not) weighing the same;
    its threshold the lowest at which at most ``rate`` of the dev sets' general and never-said questions get a
    fact (a user-facing error budget: "How do I boil an egg?" answered with the user's allergy)."""
    fitted = [c for c in cases if c.split in FITTED]
    x, y = np.array([c.x for c in fitted]), np.array([float(c.right) for c in fitted])
    weight = np.zeros(len(y))
    members = defaultdict(list)
    for i, c in enumerate(fitted):
        members[c.dataset, c.split, c.kind, c.right].append(i)
    for idx in members.values():
        weight[idx] = 1.0 / len(idx)
    weight *= len(y) / weight.sum()
    model = fit_model(FACT_FEATURES, x, y, weight)
    negative = np.array([c.x for c in cases if c.split in THRESHOLD_SPLITS and c.kind in ("general", "absent")])
    scores = np.sort(probabilities(model, negative, FACT_FEATURES))
    model.threshold = round(float(scores[int(np.ceil((1 - rate) * len(scores))) - 1]) + 1e-4, 4)
    return model


def rates(cases: list[Case], model) -> dict:
    """Per set and kind: the share of questions given their fact (fact probes, LoCoMo questions a fact answers)
    or given any fact (general, never-said, LoCoMo-5 and LoCoMo questions no fact answers)."""
    out = defaultdict(list)
    p = probabilities(model, np.array([c.x for c in cases]), FACT_FEATURES)
    for c, prob in zip(cases, p):
        fired = prob >= model.threshold
        kind = c.kind if c.kind != "locomo" else ("locomo (a fact answers)" if c.answerable else "locomo (none does)")
        out[f"{c.dataset}/{c.split}/{kind}"].append(float(fired and c.right) if c.answerable else float(fired))
    return {k: {"n": len(v), "rate": round(float(np.mean(v)), 3)} for k, v in sorted(out.items())}


def load_sets(quick: bool) -> dict:
    n = 6 if quick else 20
    common = dict(questions="both", absent=4)
    locomo = load_conversations(LOCOMO).conversations if LOCOMO.exists() else []
    sets = {
        ("generated", "tuning"): generate_dataset(n, seed=0, **common),
        ("generated", "dev"): generate_dataset(n, seed=50, phrasing="dev", **common),
        ("generated", "dev2"): generate_dataset(n, seed=70, phrasing="dev2", **common),
        ("generated", "dev-kinds"): generate_dataset(n, seed=710, kinds="dev", **common),
        ("generated", "held-out"): generate_dataset(n, seed=100, phrasing="heldout", **common),
        ("generated", "held-out-kinds"): generate_dataset(n, seed=310, kinds="heldout", **common),
    }
    if locomo:
        sets[("locomo", "tuning")] = locomo[:2] if quick else locomo[:5]
        sets[("locomo", "held-out")] = locomo[5:7] if quick else locomo[5:10]
    return sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 generated and 2 LoCoMo conversations a split")
    parser.add_argument("--json", type=Path, help="write every number to this file")
    parser.add_argument("--general-rate", type=float, default=0.05,
                        help="the share of dev general and never-said questions allowed a fact (the threshold)")
    args = parser.parse_args()
    started = time.perf_counter()
    sets = load_sets(args.quick)

    extraction = {name: statement_scores(DATA / f"{name}.json") for name in STATEMENT_SETS}
    extraction |= {"generated": {split: planted_scores(convs) for (d, split), convs in sets.items() if d == "generated"}}
    print("## Extraction\n\n| set | section | recall | precision | right kind | non-facts taken |\n|---|---|---:|---:|---:|---:|")
    for name in STATEMENT_SETS:
        for section, r in extraction[name].items():
            kind = "–" if r["kind"] is None else f"{r['kind']:.2f}"
            print(f"| {name} | {section} | {r['recall']:.2f} | {r['precision']:.2f} | {kind} | "
                  f"{r['false_facts']:.2f} |")
    print("\n| generated | planted found | filler taken | corrections superseding |\n|---|---:|---:|---:|")
    for split, r in extraction["generated"].items():
        print(f"| {split} | {r['found']:.2f} of {r['planted']} | {r['filler_taken']:.2f} | "
              f"{r['superseded']:.2f} of {r['corrections']} |")

    cases = build_cases(sets, default_embedder())
    print(f"\n[{len(cases)} messages scored in {time.perf_counter() - started:.0f} s]", file=sys.stderr)
    model = fit(cases, args.general_rate)
    fitted, shipped = rates(cases, model), rates(cases, DEFAULT_FACT_MODEL)
    print("\n## The fact model: questions a fact answers given it; the others given any\n")
    print("| set/kind | n | fitted now | shipped |\n|---|---:|---:|---:|")
    for key in fitted:
        print(f"| {key} | {fitted[key]['n']} | {fitted[key]['rate']:.2f} | {shipped[key]['rate']:.2f} |")
    print("\nFitted (paste into localpager/retrieval/facts.py if it differs from DEFAULT_FACT_MODEL):\n")
    print(model_source("DEFAULT_FACT_MODEL", model))
    if args.json:
        data = {"setup": {"quick": args.quick, "messages": len(cases), "threshold_sets": THRESHOLD_SPLITS},
                "extraction": extraction, "fact_model": {"fitted": model.__dict__, "rates": fitted, "shipped": shipped},
                "seconds": round(time.perf_counter() - started, 1)}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=1, default=str))


if __name__ == "__main__":
    main()
