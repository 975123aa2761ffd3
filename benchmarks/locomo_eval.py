"""LoCoMo end to end on a range of conversations and question categories, for before/after comparisons.

Uses only what every version of localpager has (``load_conversations``, ``EvalConfig``, ``evaluate``), so
the same command measures an older checkout too:

    .venv/bin/python benchmarks/locomo_eval.py --conversations 6-10 --limit 20 --json results/locomo-after.json
    git worktree add /tmp/before aa1b650
    PYTHONPATH=/tmp/before .venv/bin/python benchmarks/locomo_eval.py --conversations 6-10 --limit 20 \\
        --json results/locomo-before.json

Prints e2e and oracle F1 per category (LoCoMo's own scoring, partial F1 for multi-hop).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from localpager.lab.evaluate import EvalConfig, evaluate
from localpager.store.loaders import load_conversations

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", default="6-10", help="A-B, 1-based inclusive")
    parser.add_argument("--categories", default="1,2,3,4")
    parser.add_argument("--limit", type=int, default=None, help="at most N questions per conversation")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    first, _, last = args.conversations.partition("-")
    categories = {int(c) for c in args.categories.split(",")}
    conversations = load_conversations(LOCOMO).conversations[int(first) - 1 : int(last or first)]
    for conv in conversations:  # older versions have no category filter: keep only the asked categories
        conv.probes = [p for p in conv.probes if p.extra.get("category") in categories][: args.limit]
    report = evaluate(conversations, EvalConfig()).to_dict()
    print(f"{report['probes']} questions, {report['seconds']} s, page selection {report['page_selection_accuracy']}")
    print("| category | questions | e2e F1 | oracle F1 | page selection |\n|---|---:|---:|---:|---:|")
    for name, r in report["by_type"].items():
        print(f"| {name} | {r['probes']} | {r['e2e_accuracy']:.3f} | {r['oracle_e2e_accuracy']:.3f} | "
              f"{r['page_selection_accuracy']} |")
    print(f"| all | {report['probes']} | {report['e2e_accuracy']:.3f} | {report['oracle_e2e_accuracy']:.3f} | "
          f"{report['page_selection_accuracy']} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False))
        print(f"wrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
