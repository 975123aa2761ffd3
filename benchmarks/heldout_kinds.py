"""Standing facts on kinds nothing was written or tuned for: the kinds trained on against the held-out kinds.

Issue 38's "measure it honestly": the extractor's cues, its claims model and the fact model were written and fitted
on facts.json's kinds (the tuning, dev and dev2 phrasings, claims_train.json, LoCoMo 1-5).
``lab/data/kinds_heldout.json`` plants fifteen other kinds (a blood type, a car, a plate, a language spoken at
home, a club, a chore, a partner's way of eating, something the user cannot do, ...) in words of their own, written
without reading the extractor; nothing is ever fitted on it. Splits, each generated conversations with an explicit
and an implicit question per planted fact, the general questions and four questions about kinds never planted:

- ``trained kinds, tuning phrasing``: the words settings were chosen on (the ceiling);
- ``trained kinds, held-out phrasing``: the same kinds in words never tuned on;
- ``development kinds``: twelve other new kinds (``lab generate --kinds dev``, ``kinds_dev.json``), written apart
  from the held-out ones, on which settings that must reach a new kind may be chosen (the fact model's reading of
  the frame alone, ``benchmarks/claims.py``): a ceiling for new kinds, not a check;
- ``held-out kinds``: new kinds in new words (``lab generate --kinds heldout``).

Measured, per split:

1. extraction (``core.facts``, no model): planted statements (and corrections) that became a standing fact
   (recall); filler user turns that became one (the false-fact rate), and precision over the user turns taken;
   newest value: of the facts corrected later, those whose current fact at the end is the correction's and
   none of the older statements' (also over the corrections whose every statement became a fact); wrong
   replacements: a planted fact's fact replaced by another planted fact's (two things, one hidden), and
   replacements with a filler turn's fact on either side.
2. relevance (``retrieval.facts.FactRanker`` with the real embedder and the shipped fact model): at each question's
   point, the conversation's facts as the store has them then; an explicit or implicit question is given its
   fact (the newest statement's) or another one, a general or never-said question should be given none.
3. "not remembered" (``benchmarks/abstention.py``'s cases and the shipped floor, ``retrieval.answerable``): the
   explicit questions answered "not remembered" (false abstention) and the never-said ones (abstention), over
   every question and over those the recall gate pages in.
4. with ``--answers N`` (N > 0): N forward conversations a split ingested into a new store and asked through
   ``LocalPager.ask`` with the real model (budget 1024, nothing remembered): answers that mention the planted
   value (explicit, implicit), and "I don't remember" on never-said and on fact questions.

    .venv/bin/python benchmarks/heldout_kinds.py [--quick] [--answers N] [--json FILE]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
SPLITS = {  # name -> the generator's arguments (seeds apart from every set fitted on)
    "trained kinds, tuning phrasing": dict(seed=0),
    "trained kinds, held-out phrasing": dict(seed=100, phrasing="heldout"),
    "development kinds": dict(seed=700, kinds="dev"),  # new kinds settings were chosen on (kinds_dev.json)
    "held-out kinds": dict(seed=300, kinds="heldout"),
}
ANSWER_SPLITS = ("trained kinds, held-out phrasing", "held-out kinds")
BUDGET = 1024


def load_sets(n: int) -> dict:
    from localpager.lab.synthetic import generate_dataset

    return {name: generate_dataset(n, questions="both", absent=4, **args) for name, args in SPLITS.items()}


def fact_probes(conv, explicit_only: bool = False) -> list:
    from localpager.core.records import ABSENT_PROBE, GENERAL_PROBE

    return [p for p in conv.probes if p.type not in (GENERAL_PROBE, ABSENT_PROBE)
            and not (explicit_only and p.extra.get("style") == "implicit")]


# -- 1. extraction ---------------------------------------------------------------------------------------------
def extraction(convs: list) -> dict:
    """Planted statements found, filler user turns taken, and the corrected facts whose newest value stands (of
    all, and of those whose every statement became a fact); facts replaced by a fact of another planted fact
    (``wrong_replacements``: two different things, one hidden) and replacements with a filler turn's fact on
    either side (``filler_replaced``)."""
    from localpager.core.facts import extract, facts_of

    found = planted = taken = filler = newest = corrected = superseded = both = newest_both = 0
    wrong = filler_replaced = replaced = 0
    by_kind: dict[str, list[bool]] = defaultdict(list)
    for conv in convs:
        stated = {i: p.type for p in fact_probes(conv, explicit_only=True) for i in p.extra["stated"]}
        probe_of = {i: n for n, p in enumerate(fact_probes(conv, explicit_only=True)) for i in p.extra["stated"]}
        for turn in conv.turns:
            if turn.role == "user":
                hit = bool(extract(turn))
                if turn.index in stated:
                    by_kind[stated[turn.index]].append(hit)
                planted, found = planted + (turn.index in stated), found + (hit and turn.index in stated)
                filler, taken = filler + (turn.index not in stated), taken + (hit and turn.index not in stated)
        facts = facts_of(conv.turns)
        turn_of = {f.fact_id: f.turn for f in facts}
        for f in facts:
            if f.superseded_by is not None:
                replaced += 1
                by = turn_of[f.superseded_by]
                filler_replaced += f.turn not in probe_of or by not in probe_of
                wrong += f.turn in probe_of and by in probe_of and probe_of[f.turn] != probe_of[by]
        for probe in fact_probes(conv, explicit_only=True):
            if probe.extra["old_answers"]:
                corrected += 1
                current = {f.turn for f in facts if f.current}
                older = set(probe.extra["stated"][:-1])
                is_newest = probe.evidence[0] in current and not current & older
                newest += is_newest
                new = {f.fact_id for f in facts if f.turn == probe.evidence[0]}
                superseded += any(f.superseded_by in new for f in facts if f.turn in older)
                if {f.turn for f in facts} >= set(probe.extra["stated"]):  # every statement of it became a fact
                    both, newest_both = both + 1, newest_both + is_newest
    return {"planted": planted, "recall": _share(found, planted), "filler_turns": filler,
            "filler_taken": _share(taken, filler), "precision": _share(found, found + taken),
            "corrected": corrected, "newest_value": _share(newest, corrected),
            "old_value_superseded": _share(superseded, corrected), "both_extracted": both,
            "newest_value_both_extracted": _share(newest_both, both), "replaced": replaced,
            "wrong_replacements": wrong, "filler_replaced": filler_replaced,
            "recall_by_type": {k: {"n": len(v), "recall": _share(sum(v), len(v))} for k, v in sorted(by_kind.items())}}


# -- 2. relevance ----------------------------------------------------------------------------------------------
def relevance(convs: list, embed) -> dict:
    """Per question kind: given its own fact, given another fact, given none (general and never-said: any)."""
    from localpager.core.facts import facts_of
    from localpager.retrieval.facts import FactRanker

    from standing_facts import kind_of

    out: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for conv in convs:
        for probe in conv.probes:
            at = len(conv.turns) - 1 if probe.at is None else probe.at
            hits = FactRanker(facts_of(conv.turns[: at + 1]), embed).relevant(probe.question)
            right = bool(hits) and hits[0].fact.turn in probe.evidence
            out[kind_of(probe)].append((right, bool(hits) and not right))
    return {kind: {"n": len(v), "its_fact": _share(sum(r for r, _ in v), len(v)),
                   "another_fact": _share(sum(w for _, w in v), len(v))} for kind, v in sorted(out.items())}


# -- 3. "not remembered" ---------------------------------------------------------------------------------------
def abstention(sets: dict) -> dict:
    """The shipped floor on abstention.py's cases: the explicit questions, the same after their fact is forgotten,
    and the never-said ones."""
    import abstention as floor
    from localpager.retrieval.answerable import DEFAULT_ANSWER_MODEL

    cases = floor.build_cases({("generated", name): convs for name, convs in sets.items()})
    floor.score(cases)
    cases = [c for c in cases if c.x.any()]
    every, gated = floor.rates(cases, DEFAULT_ANSWER_MODEL, False), floor.rates(cases, DEFAULT_ANSWER_MODEL, True)
    out: dict[str, dict] = defaultdict(dict)
    for key, r in every.items():
        _, split, kind = key.split("/", 2)
        g = gated.get(key, {"n": 0, "not_remembered": None})
        out[split][kind] = {"n": r["n"], "not_remembered": r["not_remembered"], "paged_in": g["n"],
                            "not_remembered_paged_in": g["not_remembered"]}
    return {split: out[split] for split in sets if split in out}


# -- 4. answers ------------------------------------------------------------------------------------------------
def answers(convs: list, work: Path) -> dict:
    """Forward conversations ingested into a new store and asked through ``LocalPager.ask`` (nothing
    remembered): the share of answers naming the planted value, and of "I don't remember" answers."""
    from localpager.lab.synthetic import mentions
    from localpager.memory.api import LocalPager
    from localpager.runtime.prompts import NOT_REMEMBERED
    from localpager.store.loaders import dump_jsonl

    from standing_facts import kind_of

    data = work / f"answers-{len(list(work.iterdir()))}.jsonl"
    dump_jsonl(convs, data)
    out: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    lp = LocalPager(work / f"{data.stem}.db")
    try:
        lp.ingest(data)
        for conv in convs:
            chat = lp.conversation(conv.id)
            for probe in conv.probes:
                kind = kind_of(probe)
                if kind == "general":
                    continue
                text = chat.ask(probe.question, remember=False, budget=BUDGET).answer
                out[kind].append((mentions(text, probe.answers) if probe.answers else False,
                                  NOT_REMEMBERED.split(":")[0].lower() in text.lower()))
    finally:
        lp.close()
    return {kind: {"n": len(v), "names_value": _share(sum(a for a, _ in v), len(v)),
                   "not_remembered": _share(sum(d for _, d in v), len(v))} for kind, v in sorted(out.items())}


# -- report ----------------------------------------------------------------------------------------------------
def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.2f}"


def report(result: dict) -> None:
    """The tables, on stderr (stdout is the JSON object)."""
    say = functools.partial(print, file=sys.stderr)
    say("## Extraction (no model)\n\n| split | planted | recall | filler taken | precision | corrected | newest value |"
          " newest value, both extracted | wrong replacements |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for split, r in result["extraction"].items():
        say(f"| {split} | {r['planted']} | {_fmt(r['recall'])} | {_fmt(r['filler_taken'])} | {_fmt(r['precision'])} "
              f"| {r['corrected']} | {_fmt(r['newest_value'])} | {_fmt(r['newest_value_both_extracted'])} "
              f"({r['both_extracted']}) | {r['wrong_replacements']} + {r['filler_replaced']} filler |")
    say("\n## Relevance (fact model): its fact / another fact\n\n| split | explicit | implicit | general: any | "
          "never said: any |\n|---|---:|---:|---:|---:|")
    for split, r in result["relevance"].items():
        cells = [f"{_fmt(r[k]['its_fact'])} / {_fmt(r[k]['another_fact'])}" for k in ("explicit", "implicit")]
        cells += [_fmt(r[k]["its_fact"] + r[k]["another_fact"]) for k in ("general", "absent")]
        say(f"| {split} | {' | '.join(cells)} |")
    say('\n## "Not remembered" (shipped floor): all / paged in\n\n| split | explicit (false) | never said | '
          "forgotten |\n|---|---:|---:|---:|")
    for split, r in result["abstention"].items():
        cells = [f"{_fmt(r[k]['not_remembered'])} / {_fmt(r[k]['not_remembered_paged_in'])}"
                 for k in ("probe", "absent", "forgotten")]
        say(f"| {split} | {' | '.join(cells)} |")
    if result.get("answers"):
        say('\n## Answers (LocalPager.ask, real model): names the value / "I don\'t remember"\n\n| split | '
              "explicit | implicit | never said: \"I don't remember\" |\n|---|---:|---:|---:|")
        for split, r in result["answers"].items():
            cells = [f"{_fmt(r[k]['names_value'])} / {_fmt(r[k]['not_remembered'])}" for k in ("explicit", "implicit")]
            say(f"| {split} | {' | '.join(cells)} | {_fmt(r['absent']['not_remembered'])} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 conversations a split instead of 20")
    parser.add_argument("--answers", type=int, default=0, metavar="N",
                        help="also ask N forward conversations a split through LocalPager.ask with the real model")
    parser.add_argument("--json", type=Path, help="write every number to this file")
    args = parser.parse_args()
    started = time.perf_counter()
    n = 6 if args.quick else 20
    sets = load_sets(n)
    result = {"setup": {"quick": args.quick, "conversations": n, "splits": {k: {**v} for k, v in SPLITS.items()},
                        "questions": "both", "absent": 4, "answers": args.answers, "budget": BUDGET,
                        "load_average": round(os.getloadavg()[0], 2)}}
    result["extraction"] = {name: extraction(convs) for name, convs in sets.items()}

    from localpager.retrieval.embedder import default_embedder

    embedder = default_embedder()
    result["relevance"] = {name: relevance(convs, embedder.encode) for name, convs in sets.items()}
    print(f"[relevance scored in {time.perf_counter() - started:.0f} s]", file=sys.stderr)
    result["abstention"] = abstention(sets)
    print(f"[abstention scored in {time.perf_counter() - started:.0f} s]", file=sys.stderr)
    if args.answers > 0:
        from localpager.lab.synthetic import generate_dataset

        with tempfile.TemporaryDirectory() as tmp:
            result["answers"] = {}
            for name in ANSWER_SPLITS:  # other conversations than above: the next seed
                drawn = {**SPLITS[name], "seed": SPLITS[name]["seed"] + 1}
                convs = generate_dataset(args.answers, revisiting=False, questions="both", absent=4, **drawn)
                result["answers"][name] = answers(convs, Path(tmp))
        print(f"[answers in {time.perf_counter() - started:.0f} s]", file=sys.stderr)
    result["seconds"] = round(time.perf_counter() - started, 1)
    report(result)  # tables on stderr, the JSON object on stdout
    print(json.dumps(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
