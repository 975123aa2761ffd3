"""Do bookmarks name the facts? The share of planted facts whose value is a keyword of the page holding it.

Generated conversations are paged as a chat pages them (``Pager.add_turn``: a page gets its keywords when
it closes, against the pages before it) and as ``ingest`` does (``page_conversation``: every page against
the whole conversation), with the model-free keyword strategies; no model is loaded (tokens are estimated,
which moves no page boundary under ``fixed_20``). A fact counts when a keyword of a page holding its
newest statement names its value (``eval.evaluate.keyword_covers``, the figure ``eval`` reports as
``bookmark_fact_coverage``). Settings were chosen on the tuning and dev phrasings; the held-out phrasings
are reported only.

    .venv/bin/python benchmarks/bookmark_coverage.py [--n 10] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from localpager.core.pager import Pager, PagingConfig, page_conversation
from localpager.core.tokens import ApproxTokenCounter
from localpager.lab.evaluate import keyword_covers
from localpager.lab.choices import Phrasing
from localpager.lab.synthetic import generate_dataset

SEEDS = {"tuning": 0, "dev": 50, "dev2": 70, "heldout": 100}


def coverage(phrasing: str, n: int, strategy: str, path: str) -> dict[str, float]:
    """Covered share of the facts, overall and by fact type."""
    config = PagingConfig(keywords=strategy)
    found = defaultdict(list)
    for conv in generate_dataset(n, seed=SEEDS[phrasing], phrasing=phrasing):
        if path == "chat":
            pager = Pager(ApproxTokenCounter(), config)
            for turn in conv.turns:
                pager.add_turn(turn)
            pager.set_keywords(pager.pages[-1:])  # the open page, as it will be when it closes
        else:
            pager = page_conversation(conv.turns, ApproxTokenCounter(), config)
        for probe in conv.probes:
            if not probe.evidence:
                continue
            keywords = pager.page_of_turn(probe.evidence[0]).keywords
            ok = any(keyword_covers(k, probe.answers) for k in keywords)
            found["all"].append(ok)
            found[probe.type].append(ok)
    return {kind: round(sum(v) / len(v), 3) for kind, v in sorted(found.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10, help="conversations per phrasing set")
    parser.add_argument("--strategies", default="heuristic,tfidf,random")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = {}
    print("| phrasing | strategy | paged as | facts covered | by type |\n|---|---|---|---:|---|")
    for phrasing in [p for p in Phrasing if p != Phrasing.DEV]:
        for strategy in args.strategies.split(","):
            for path in ("chat", "ingest"):
                r = coverage(phrasing, args.n, strategy, path)
                results[f"{phrasing}/{strategy}/{path}"] = r
                by_type = ", ".join(f"{k} {v:.2f}" for k, v in r.items() if k != "all")
                print(f"| {phrasing} | {strategy} | {path} | {r['all']:.2f} | {by_type} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
