"""Fit the recall gate and measure the ranking's priors: when to page in, and what.

Setup (what the product faces at the default budget, as in ``retrieval_fusion.py``): fixed_20 pages; at
each message's ask point every page but the newest is evicted; turns are ranked by the product's own
``ranking.rank_turns`` (dense cosines of ``turn.text`` precomputed once, BM25 as in the product).

Messages:
- probes: questions that need an evicted turn (generated probes; LoCoMo categories 1-4);
- general questions: questions a user asks a chat model that need nothing said before, asked at the end
  (generated: the conversation's own ``general`` probes; LoCoMo: 6 a conversation from the same pool);
- small talk: as in ``retrieval_fusion.py`` (generated: the user turns of the last 20 filler turns, which
  repeat earlier filler nearly word for word; LoCoMo: turns of the last third that do not point back).

Sets. Tuning: generated seed 0 with the tuning phrasings and LoCoMo 1-5, with the tuning general
questions. Dev and dev2: generated seeds 50 and 70 with the dev phrasings (``phrasing_dev.json``,
``phrasing_dev2.json`` in ``localpager/lab/data/``, each written apart), with their own general questions:
tuned on beside the tuning set, so that what is chosen holds for other words. Held
out: generated seed 100 with the held-out phrasings (``phrasing_heldout.json``, written apart again),
LoCoMo 6-10, the held-out general questions: reported, never used. The gate's logistic model is fitted on
the tuning and dev probes against their general questions and LoCoMo's small talk (the generated small
talk, near-verbatim repeats of earlier turns, is reported, not fitted), and its threshold is where the
share of probes missed equals the share of general questions paged in on the two dev sets pooled
(``equal_error_threshold``).

    .venv/bin/python benchmarks/recall_gate.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from localpager.core.boundaries import get_boundary, split_pages
from localpager.core.records import GENERAL_PROBE, Page, Transcript
from localpager.lab.fitting import fit_logistic
from localpager.lab.synthetic import general_questions, generate_dataset
from localpager.retrieval.embedder import default_embedder
from localpager.retrieval.gate import DEFAULT_MODEL, FEATURES, GateModel, gate_features
from localpager.retrieval.ranking import HybridSettings, LexicalIndex, best_per_page, is_question, rank_turns
from localpager.store.loaders import load_conversations

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"
BOUNDARY = "fixed_20"
SPLITS = ("tuning", "dev", "dev2", "held-out")
FITTED = ("tuning", "dev", "dev2")
DATASETS = ("generated", "locomo")
KINDS = ("probe", "general", "small talk")
DEV_SPLITS = ("dev", "dev2")  # the gate's threshold is set on these (equal_error_threshold)
GENERAL_PER_LOCOMO = 6


# -- cases ---------------------------------------------------------------------------------------------
class Case:
    """One message asked after ``n`` turns of ``conv``."""

    def __init__(self, dataset: str, split: str, kind: str, conv: Transcript, message: str, n: int,
                 evidence: list[int], label: str):
        self.dataset, self.split, self.kind, self.conv = dataset, split, kind, conv
        self.message, self.n, self.label = message, n, label
        ranges = split_pages(conv.turns[:n], get_boundary(BOUNDARY))
        self.pages = [Page(i + 1, r.start, r.stop - 1, evicted=True) for i, r in enumerate(ranges)][:-1]
        self.evidence_pages = {p.page_id for p in self.pages for t in evidence if p.holds(t)}
        self.hits: dict[str, list] = {}  # ranking name -> turn hits, best first


def build_cases(sets: dict) -> list[Case]:
    cases = []
    for (dataset, split), (convs, phrasing) in sets.items():
        for conv in convs:
            for probe in conv.probes:
                if probe.type == GENERAL_PROBE:
                    cases.append(Case(dataset, split, "general", conv, probe.question, len(conv.turns), [], "general"))
                elif probe.evidence and (dataset == "generated" or probe.extra.get("category") in (1, 2, 3, 4)):
                    at = len(conv.turns) - 1 if probe.at is None else probe.at
                    # an update probe counts on any statement of its fact: newest-wins then shows the newest
                    stated = probe.extra.get("stated") or probe.evidence
                    label = probe.type if dataset == "generated" else f"category {probe.extra['category']}"
                    cases.append(Case(dataset, split, "probe", conv, probe.question, at + 1, stated, label))
            if dataset == "locomo":
                pool = general_questions(phrasing)
                for q in random.Random(f"locomo-general:{conv.id}").sample(pool, GENERAL_PER_LOCOMO):
                    cases.append(Case(dataset, split, "general", conv, q, len(conv.turns), [], "general"))
            cases += small_talk(dataset, split, conv)
    return [c for c in cases if c.pages and (c.kind != "probe" or c.evidence_pages)]


def small_talk(dataset: str, split: str, conv: Transcript, per_conv: int = 40) -> list[Case]:
    """As ``retrieval_fusion.small_talk_cases`` (generated: the last 20 filler turns' user turns)."""
    evidence = {i for p in conv.probes for i in p.evidence}
    if dataset == "generated":
        chosen = [t.index for t in conv.turns[-20:] if t.role == "user" and t.index not in evidence]
    else:
        import re

        back = re.compile(r"\b(remember|last time|you (said|mentioned|told)|told me|we (talked|discussed|spoke)|"
                          r"since we (last )?(talked|spoke|chatted)|as i (said|mentioned)|earlier)\b", re.I)
        starts = [t.index for t in conv.turns if t.index == 0 or t.time != conv.turns[t.index - 1].time]
        later = starts[len(starts) - len(starts) // 3]
        pool = [t.index for t in conv.turns[later:] if t.index not in evidence and not back.search(t.text)]
        picks = np.unique(np.linspace(0, len(pool) - 1, min(per_conv, len(pool))).round().astype(int))
        chosen = [pool[i] for i in picks]
    return [Case(dataset, split, "small talk", conv, conv.turns[i].text, i, [], "small talk") for i in chosen]


# -- ranking -------------------------------------------------------------------------------------------
def rank_all(cases: list[Case], rankings: dict[str, HybridSettings]) -> None:
    """Each case's turns ranked by ``rank_turns`` under each settings (cosines embedded once)."""
    embedder = default_embedder()
    convs = {id(c.conv): c.conv for c in cases}
    vectors = {key: embedder.encode([t.text for t in conv.turns], batch_size=32) for key, conv in convs.items()}
    queries = embedder.encode([c.message for c in cases], batch_size=32)
    lexical: dict[str, LexicalIndex] = {}
    for case, q in zip(cases, queries):
        cosines = vectors[id(case.conv)] @ q

        def dense(question, indices, cosines=cosines):
            return {i: float(cosines[i]) for i in indices}

        index = lexical.setdefault(case.conv.id, LexicalIndex(case.conv.id))
        for name, settings in rankings.items():
            case.hits[name] = rank_turns(case.message, case.conv.turns[: case.n], case.pages, dense, index, settings)


def page_hits(cases: list[Case], name: str, k: int) -> float:
    found = [any(h.page_id in c.evidence_pages for h in best_per_page(c.hits[name])[:k]) for c in cases]
    return float(np.mean(found)) if found else float("nan")


# -- the gate ------------------------------------------------------------------------------------------
def features(cases: list[Case], name: str) -> np.ndarray:
    return np.array([gate_features(c.message, c.hits[name], c.conv.turns).vector() for c in cases])


def fit_gate(cases: list[Case], x: np.ndarray) -> GateModel:
    """The gate's model, fitted on the tuning cases (see the module docstring)."""
    tuning = np.array([c.split in FITTED and not (c.dataset == "generated" and c.kind == "small talk")
                       for c in cases])
    y = np.array([c.kind == "probe" for c in cases], dtype=float)
    weight = np.zeros(len(cases))
    groups = defaultdict(list)
    for i, c in enumerate(cases):
        if tuning[i]:
            groups[c.dataset, c.split, c.kind].append(i)
    for (_, _, kind), members in groups.items():  # each group weighs the same; LoCoMo's small talk half
        weight[members] = (0.5 if kind == "small talk" else 1.0) / len(members)
    weight *= tuning.sum() / weight.sum()
    beta, mean, scale = fit_logistic(x[tuning], y[tuning], weight[tuning])
    model = GateModel(weights=dict(zip(FEATURES, beta[1:].round(4).tolist())), bias=round(float(beta[0]), 4),
                      means=dict(zip(FEATURES, mean.round(4).tolist())), scales=dict(zip(FEATURES, scale.round(4).tolist())))
    p = probabilities(model, x)
    return replace(model, threshold=equal_error_threshold(cases, p))


def equal_error_threshold(cases: list[Case], p: np.ndarray) -> float:
    """The threshold at which the share of probes missed equals the share of general questions paged in, on
    the generated dev sets pooled (phrasings the templates never used: the nearest thing to a user's own
    words among the sets fitted on). Neither error is cheaper for a user: a memory question answered without
    its memory, or a general question answered from an unrelated one."""
    dev = [i for i, c in enumerate(cases) if c.split in DEV_SPLITS and c.dataset == "generated"]
    probes = np.sort(p[[i for i in dev if cases[i].kind == "probe"]])
    general = p[[i for i in dev if cases[i].kind == "general"]]
    best, gap = 0.5, np.inf
    for t in probes:
        missed, paged = float(np.mean(probes < t)), float(np.mean(general >= t))
        if abs(missed - paged) < gap:
            best, gap = float(t), abs(missed - paged)
    return round(best - 1e-4, 4)


def probabilities(model: GateModel, x: np.ndarray) -> np.ndarray:
    from localpager.retrieval.gate import GateFeatures

    return np.array([model.probability(GateFeatures(*row)) for row in x])


def rates(cases: list[Case], fired: np.ndarray) -> dict[str, float]:
    out = {}
    for split in SPLITS:
        for dataset in DATASETS:
            for kind in KINDS:
                members = [i for i, c in enumerate(cases) if (c.split, c.dataset, c.kind) == (split, dataset, kind)]
                if members:
                    out[f"{dataset}/{split}/{kind}"] = round(float(fired[members].mean()), 3)
    return out


# -- main ----------------------------------------------------------------------------------------------
def load_sets(quick: bool) -> dict:
    n = 4 if quick else 10
    locomo = load_conversations(LOCOMO).conversations
    return {
        ("generated", "tuning"): (generate_dataset(n, seed=0), "tuning"),
        ("locomo", "tuning"): (locomo[:2] if quick else locomo[:5], "tuning"),
        ("generated", "dev"): (generate_dataset(n, seed=50, phrasing="dev"), "dev"),
        ("generated", "dev2"): (generate_dataset(n, seed=70, phrasing="dev2"), "dev2"),
        ("generated", "held-out"): (generate_dataset(n, seed=100, phrasing="heldout"), "heldout"),
        ("locomo", "held-out"): (locomo[5:7] if quick else locomo[5:10], "heldout"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 generated and 2 LoCoMo conversations a split")
    parser.add_argument("--json", type=Path, help="write every number to this file")
    args = parser.parse_args()
    started = time.perf_counter()

    cases = build_cases(load_sets(args.quick))
    chosen = HybridSettings()
    rankings = {"before (no priors)": replace(chosen, telling_weight=0.0, answer_type_weight=0.0, speaker_weight=0.0),
                "chosen (priors)": chosen}
    rank_all(cases, rankings)
    print(f"[{len(cases)} cases ranked in {time.perf_counter() - started:.0f} s]", file=sys.stderr)

    # 1. what is injected: page top-1 / top-3, per fact type and LoCoMo category
    probes = [c for c in cases if c.kind == "probe"]
    groups = defaultdict(list)
    for c in probes:
        groups[c.dataset, c.split, "all"].append(c)
        groups[c.dataset, c.split, c.label].append(c)
    ranking_rows = []
    print("## Ranking: evidence page first / among the first three\n")
    print("| set | group | probes | " + " | ".join(rankings) + " |\n|---|---|---:|" + "---:|" * len(rankings))
    for key in sorted(groups, key=lambda k: (SPLITS.index(k[1]), k[0], k[2] != "all", k[2])):
        members = groups[key]
        scores = {name: (page_hits(members, name, 1), page_hits(members, name, 3)) for name in rankings}
        ranking_rows.append({"dataset": key[0], "split": key[1], "group": key[2], "probes": len(members),
                             "scores": scores})
        print(f"| {key[0]} {key[1]} | {key[2]} | {len(members)} | "
              + " | ".join(f"{t1:.2f} / {t3:.2f}" for t1, t3 in scores.values()) + " |")

    # 2. when to page in: the question form (the rule before the gate) and the gate, fitted on tuning
    x = features(cases, "chosen (priors)")
    model = fit_gate(cases, x)
    p = probabilities(model, x)
    shipped = probabilities(DEFAULT_MODEL, x)
    rules = {
        "question form (before)": np.array([is_question(c.message) for c in cases], dtype=float),
        "gate (fitted now)": (p >= model.threshold).astype(float),
        "gate (shipped in localpager.retrieval.gate)": (shipped >= DEFAULT_MODEL.threshold).astype(float),
    }
    rule_rates = {name: rates(cases, fired) for name, fired in rules.items()}
    print("\n## When to page in: share of probes / general questions / small talk that page in\n")
    keys = [k for k in (f"{d}/{s}" for s in SPLITS for d in DATASETS) if any(r.startswith(k + "/") for r in rule_rates["question form (before)"])]
    print("| rule | " + " | ".join(keys) + " |\n|---|" + "---:|" * len(keys))
    for name, r in rule_rates.items():
        print(f"| {name} | " + " | ".join(" / ".join(f"{r.get(f'{k}/{kind}', float('nan')):.2f}" for kind in KINDS)
                                          for k in keys) + " |")
    print("\nFitted on the tuning sets (paste into localpager/gate.py if it differs from DEFAULT_MODEL):\n")
    print(f"GateModel(\n    weights={model.weights},\n    bias={model.bias},\n    means={model.means},\n"
          f"    scales={model.scales},\n    threshold={model.threshold},\n)")
    if model != DEFAULT_MODEL:
        print("\nNOTE: localpager.retrieval.gate.DEFAULT_MODEL differs from this fit")
    if args.json:
        data = {"setup": {"boundary": BOUNDARY, "quick": args.quick, "cases": len(cases),
                          "threshold_sets": DEV_SPLITS},
                "rankings": {name: asdict(s) for name, s in rankings.items()},
                "ranking": ranking_rows, "gate": {"fitted": asdict(model), "rates": rule_rates},
                "seconds": round(time.perf_counter() - started, 1)}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()
