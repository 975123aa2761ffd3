"""Fit the relevance floor: when what a recall found answers the question, and when nothing about it is remembered.

Setup (as ``recall_gate.py``: what the product faces at the default budget): fixed_20 pages, every page but the
newest evicted at the question's point, turns ranked by the product's own ``ranking.rank_turns`` (cosines of
``turn.text`` embedded once, BM25 as in the product); the best-ranked turn is what a recall injects first, and
the floor (``retrieval.answerable``) reads its features with the recall gate's probability.

Questions:
- answerable: generated fact probes (explicit), LoCoMo categories 1-4;
- unanswerable: generated questions about kinds never planted (``absent``), the same fact probes asked after
  their fact was forgotten (every turn stating it blanked, as a forget leaves it), LoCoMo category 5 (about
  things never said: mostly a swapped speaker).

The floor is asked only when no standing fact answers (the fact model's best match below its threshold and no
pair-bank score at the bank's): a question a fact answers is answered with it. So a question counts "not
remembered" when the floor is asked and says so, the fit reads the questions it is asked, and the development
kinds (``kinds_dev.json``) are among them: their facts are kinds the bank holds no message of (left out, as every
bank-held set is), which is what a user's own kinds are. The floor reads the pair bank's need of the question
(``needed``, ``nearest``: ``FactRanker.need_of``), each set scored with a bank that leaves its own messages out.

Fitted on the tuning and dev splits (generated tuning, dev, dev2, development kinds; LoCoMo 1-5); the threshold
is the highest at which at most 6% of the dev splits' answerable questions (dev, dev2, development kinds) are
answered "not remembered" (``--false-rate``; the share the floor before the bank's features let go): abstaining
everywhere must not pay. A question naming one of a transcript's speakers is judged by the same fit
with a threshold of its own (``FloorModel.named``), the highest at which at most the same share of LoCoMo 1-5's
answerable ones naming a speaker would: under the one threshold they got "not remembered" at 2%, their family's
share left unused while the generated questions set it (the shipped one, ``NAMED_ANSWER_MODEL``, stays unless a
refit does better). The floor reads the best standing fact's probability too (``fact``): a question whose fact the
fact model nearly took is about something said. Held out: the held-out phrasings, the held-out kinds
(``kinds_heldout.json``) and LoCoMo 6-10, reported, never used; the rates are given over every question and over
those the recall gate pages in.

    .venv/bin/python benchmarks/abstention.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from localpager.core.boundaries import get_boundary, split_pages
from localpager.core.facts import facts_of
from localpager.core.records import ABSENT_PROBE, Page, Transcript, Turn
from localpager.lab.fitting import fit_model, model_source, probabilities
from localpager.lab.synthetic import generate_dataset
from localpager.retrieval.answerable import (ANSWER_FEATURES, DEFAULT_ANSWER_MODEL, AnswerFeatures, FloorModel,
                                             answer_features, floor_for, ranking_leads, speaker_gap, speakers_named,
                                             unnamed)
from localpager.retrieval.embedder import default_embedder
from localpager.retrieval.facts import DEFAULT_FACT_MODEL, FactRanker
from localpager.retrieval.gate import DEFAULT_MODEL as GATE, GateModel, decide, gate_features
from localpager.retrieval.ranking import LexicalIndex, rank_turns
from localpager.store.loaders import load_conversations

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"
BOUNDARY = "fixed_20"
SPLITS = ("tuning", "dev", "dev2", "dev-kinds", "held-out", "held-out-kinds")
FITTED = ("tuning", "dev", "dev2", "dev-kinds")
THRESHOLD_SPLITS = ("dev", "dev2", "dev-kinds")
# The pair bank's source set of each split that shares its messages (``fact_pairs.bank_records``' origins), by the
# split names here and in heldout_kinds.py: scored with those messages left out.
BANK_ORIGIN = {"tuning": "tuning", "dev": "dev", "dev2": "dev2", "dev-kinds": "dev-kinds",
               "trained kinds, tuning phrasing": "tuning", "development kinds": "dev-kinds"}


@dataclass
class Case:
    dataset: str
    split: str
    kind: str  # answerable: probe, locomo; unanswerable: absent, forgotten, locomo-5
    answerable: bool
    conv: Transcript
    message: str
    n: int
    x: np.ndarray = field(default_factory=lambda: np.zeros(len(ANSWER_FEATURES)))
    gate: bool = False
    top: Turn | None = None  # the best-ranked turn (what a recall injects first)
    consulted: bool = True  # the floor is asked: no standing fact answers the question


NAMED = ANSWER_FEATURES.index("speaker_named")


def forgotten(conv: Transcript, turns: set[int]) -> Transcript:
    """``conv`` with ``turns`` blanked, as a forget leaves them."""
    return replace(conv, turns=[replace(t, text="") if t.index in turns else t for t in conv.turns])


def build_cases(sets: dict) -> list[Case]:
    cases = []
    for (dataset, split), convs in sets.items():
        for conv in convs:
            for probe in conv.probes:
                at = len(conv.turns) if probe.at is None else probe.at + 1
                if dataset == "locomo":
                    category = probe.extra.get("category")
                    if probe.evidence or category == 5:
                        cases.append(Case(dataset, split, "locomo-5" if category == 5 else "locomo", category != 5,
                                          conv, probe.question, at))
                elif probe.type == ABSENT_PROBE:
                    cases.append(Case(dataset, split, "absent", False, conv, probe.question, at))
                elif probe.evidence and probe.extra.get("style", "explicit") == "explicit":
                    cases.append(Case(dataset, split, "probe", True, conv, probe.question, at))
                    stated = set(probe.extra.get("stated") or probe.evidence)
                    cases.append(Case(dataset, split, "forgotten", False, forgotten(conv, stated), probe.question,
                                      len(conv.turns)))
    return cases


def _bank(embedder):
    """The pair bank as ``benchmarks/fact_pairs.py`` writes it, and each message's source set (``BANK_ORIGIN``)."""
    import fact_pairs as bank_fit
    from localpager.retrieval import fact_pairs

    messages, groups, origin = bank_fit.bank_records()
    texts = [m for m, _ in messages] + [s for g in groups for s in g]
    vectors = fact_pairs.quantized(np.asarray(embedder.encode(texts, batch_size=64), dtype=np.float32))
    shipped = fact_pairs.shipped_bank()
    bank = fact_pairs.bank_from({"messages": messages, "statements": groups, "k": bank_fit.K,
                                 "power": bank_fit.POWER, "threshold": shipped.threshold}, vectors)
    return bank, np.array(origin)


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-9)


def score(cases: list[Case]) -> None:
    """Each case's best-ranked turn, the floor's features of it, whether the gate pages in and whether the floor is
    asked at all (no standing fact answers)."""
    embedder = default_embedder()
    bank, origin = _bank(embedder)
    vectors: dict[int, np.ndarray] = {}
    lexical: dict[int, LexicalIndex] = {}
    facts: dict[tuple[int, int], FactRanker] = {}  # a conversation's standing facts at a question's point
    queries = embedder.encode([c.message for c in cases], batch_size=32)
    asked = [_asked(c) for c in cases]  # a question naming one speaker, without the names (``speaker_gap``)
    unnamed_vectors = dict(zip([a for a in asked if a], embedder.encode([a for a in asked if a], batch_size=32)))
    for case, q, bare in zip(cases, queries, asked):
        conv = case.conv
        source = BANK_ORIGIN.get(case.split) if case.dataset == "generated" else None
        leave_out = origin == source if source else None
        if id(conv) not in vectors:
            vectors[id(conv)] = embedder.encode([t.text for t in conv.turns], batch_size=32)
        cosines = vectors[id(conv)] @ q
        turns = conv.turns[: case.n]
        ranges = split_pages(turns, get_boundary(BOUNDARY))
        pages = [Page(i + 1, r.start, r.stop - 1, evicted=True) for i, r in enumerate(ranges)][:-1]
        if not pages:
            continue
        index = lexical.setdefault(id(conv), LexicalIndex(conv.id))
        hits = rank_turns(case.message, turns, pages, lambda m, idx: {i: float(cosines[i]) for i in idx}, index)
        if not len(hits):
            continue
        top = hits[0]
        verdict = decide(gate_features(case.message, hits, turns), GATE)
        speakers = sorted({t.speaker.lower() for t in turns if t.speaker})
        case.gate, case.top = verdict.recall, turns[top.turn]
        ranker = facts.get((id(conv), case.n))
        if ranker is None:
            ranker = facts[id(conv), case.n] = FactRanker(facts_of(turns), embedder.encode)
        best = ranker.best(case.message)
        need, paired = (0.0, 0.0), 0.0
        if ranker.pairs() is not None:  # the bank's reading, its own set's messages left out
            need = bank.need_of(_unit(q), leave_out)
            if ranker.facts and ranker.reads(case.message):
                facts_vectors = _unit(embedder.encode([f.text for f in ranker.facts]))
                paired = float(bank.scores(_unit(q), facts_vectors, leave_out).max())
        case.consulted = (best is None or best.probability < DEFAULT_FACT_MODEL.threshold) and paired < bank.threshold
        gap = 0.0
        if bare:
            cos = vectors[id(conv)] @ unnamed_vectors[bare]
            ranked = rank_turns(bare, turns, pages, lambda m, idx: {i: float(cos[i]) for i in idx}, index)
            if len(ranked):
                named = speakers_named(case.message, speakers)[0]
                gap = speaker_gap(bare, named, turns, ranked.turns, ranked.dense,
                                  index.table(turns).array("speaker")[ranked.turns])
        case.x = np.array(answer_features(case.message, turns[top.turn], top.dense, top.lexical, speakers,
                                          verdict.probability, best.probability if best else 0.0, gap,
                                          need, ranking_leads(top.score, top.dense, hits.scores,
                                                              hits.dense)).vector())


def _asked(case: Case) -> str:
    """``case``'s question without its speakers' names when it names exactly one of them, else ''."""
    speakers = sorted({t.speaker.lower() for t in case.conv.turns if t.speaker})
    return unnamed(case.message, speakers) if len(speakers_named(case.message, speakers)) == 1 else ""


def fit(cases: list[Case], false_rate: float):
    """The floor on the questions it is asked (no standing fact answers them) of the fitted splits, each group
    (dataset, split, kind) weighing the same."""
    fitted = [c for c in cases if c.split in FITTED and c.consulted]
    x, y = np.array([c.x for c in fitted]), np.array([float(c.answerable) for c in fitted])
    weight = np.zeros(len(y))
    members = defaultdict(list)
    for i, c in enumerate(fitted):
        members[c.dataset, c.split, c.kind].append(i)
    for idx in members.values():
        weight[idx] = 1.0 / len(idx)
    weight *= len(y) / weight.sum()
    model = fit_model(ANSWER_FEATURES, x, y, weight)
    model.threshold = _highest(model, [c for c in cases if c.split in THRESHOLD_SPLITS and c.answerable], false_rate)
    named = [c for c in cases if c.split in FITTED and c.dataset == "locomo" and c.answerable and c.x[NAMED]]
    if not named:
        return model
    for_named = GateModel(**{**vars(model), "threshold": _highest(model, named, false_rate)})
    return FloorModel(**vars(model), named=for_named)


def _highest(model, answerable: list[Case], false_rate: float) -> float:
    """The highest threshold at which at most ``false_rate`` of ``answerable`` are answered "not remembered" (the
    floor is asked of them and their score falls below it)."""
    asked = [c.x for c in answerable if c.consulted]
    allowed = int(np.floor(false_rate * len(answerable)))
    if allowed >= len(asked):
        return 1.0
    scores = np.sort(probabilities(model, np.array(asked), ANSWER_FEATURES))
    return round(float(scores[allowed]) - 1e-4, 4)


def rates(cases: list[Case], model, gated: bool) -> dict:
    """Per set and kind: the share answered "not remembered": the floor is asked (no fact answers) and says so (of
    the questions the gate pages in, with ``gated``)."""
    out = defaultdict(list)
    for c in cases:
        if not gated or c.gate:
            judge = floor_for(model, AnswerFeatures(*c.x))
            prob = probabilities(judge, c.x[None, :], ANSWER_FEATURES)[0]
            out[f"{c.dataset}/{c.split}/{c.kind}"].append(float(c.consulted and prob < judge.threshold))
    return {k: {"n": len(v), "not_remembered": round(float(np.mean(v)), 3)} for k, v in sorted(out.items())}


def load_sets(quick: bool) -> dict:
    n = 6 if quick else 20
    sets = {
        ("generated", "tuning"): generate_dataset(n, seed=0, absent=4),
        ("generated", "dev"): generate_dataset(n, seed=50, phrasing="dev", absent=4),
        ("generated", "dev2"): generate_dataset(n, seed=70, phrasing="dev2", absent=4),
        ("generated", "dev-kinds"): generate_dataset(n, seed=710, kinds="dev", absent=4),
        ("generated", "held-out"): generate_dataset(n, seed=100, phrasing="heldout", absent=4),
        ("generated", "held-out-kinds"): generate_dataset(n, seed=310, kinds="heldout", absent=4),
    }
    if LOCOMO.exists():
        locomo = load_conversations(LOCOMO).conversations
        sets[("locomo", "tuning")] = locomo[:2] if quick else locomo[:5]
        sets[("locomo", "held-out")] = locomo[5:7] if quick else locomo[5:10]
    return sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 generated and 2 LoCoMo conversations a split")
    parser.add_argument("--json", type=Path, help="write every number to this file")
    parser.add_argument("--false-rate", type=float, default=0.06,
                        help="the share of dev answerable questions allowed \"not remembered\" (the threshold)")
    args = parser.parse_args()
    started = time.perf_counter()
    cases = build_cases(load_sets(args.quick))
    score(cases)
    cases = [c for c in cases if c.x.any()]
    print(f"[{len(cases)} questions ranked in {time.perf_counter() - started:.0f} s]", file=sys.stderr)
    model = fit(cases, args.false_rate)
    table = {"all": rates(cases, model, False), "paged in": rates(cases, model, True),
             "shipped": rates(cases, DEFAULT_ANSWER_MODEL, False),
             "shipped, paged in": rates(cases, DEFAULT_ANSWER_MODEL, True)}
    print('## "Not remembered": share of each kind of question\n')
    print("| set/kind | n | fitted now | paged in (n) | fitted now, paged in | shipped, paged in |\n|---|---:|---:|---:|---:|---:|")
    for key, r in table["all"].items():
        g = table["paged in"].get(key, {"n": 0, "not_remembered": float("nan")})
        sh = table["shipped, paged in"].get(key, {"not_remembered": float("nan")})
        print(f"| {key} | {r['n']} | {r['not_remembered']:.2f} | {g['n']} | {g['not_remembered']:.2f} | "
              f"{sh['not_remembered']:.2f} |")
    print("\nFitted (paste into localpager/retrieval/answerable.py if it differs from DEFAULT_ANSWER_MODEL):\n")
    print(model_source("CHAT_ANSWER_MODEL", model) + "  # only if it does better than the shipped one")
    if getattr(model, "named", None) is not None:
        print(model_source("NAMED_ANSWER_MODEL", model.named))
    if args.json:
        data = {"setup": {"boundary": BOUNDARY, "quick": args.quick, "questions": len(cases),
                          "false_rate": args.false_rate, "threshold_sets": THRESHOLD_SPLITS},
                "fitted": model.__dict__, "rates": table, "seconds": round(time.perf_counter() - started, 1)}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=1, default=str))


if __name__ == "__main__":
    main()
