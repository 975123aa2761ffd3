"""Issue 14's measurements: newest wins with the user's corrections, and what encryption costs on open.

    LOCALPAGER_THREADS=1 .venv/bin/python benchmarks/memory_control.py corrections results/synthetic.jsonl \
        --conversations 5 --json results/corrections.json
    .venv/bin/python benchmarks/memory_control.py encrypted-open results/synthetic.jsonl

``corrections`` runs ``localpager eval``'s own evaluation (``localpager.lab.evaluate``) twice on the same
probes: as the data is (a fact's update only says it changed: the change-cue rule of ``rerank.py``), and
with every update marked as correcting the fact's earlier statement as it is added (what
``Conversation.correct`` records), and reports ``latest_value_rate`` (update probes answered with the new
value and not the old one) and page selection for both.

``encrypted-open`` ingests the file into a plain and an encrypted store, embeds every evicted page, then
times what opening costs before the first search: the plain store reads its saved FAISS files, the
encrypted one rebuilds them in memory from the (decrypted) vectors.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _conversations(path: str, which: int):
    from localpager.store.loaders import load_conversations

    return load_conversations(path).conversations[:which]


def corrections(args) -> dict:
    from localpager.lab.evaluate import EvalConfig, evaluate, summarize
    from localpager.memory.conversation import Conversation

    conversations = _conversations(args.dataset, args.conversations)
    # conversation id -> {turn of a later statement: the turn it corrects}
    marks = {c.id: {later: earlier for p in c.probes for earlier, later in zip(p.extra.get("stated", []),
                                                                             p.extra.get("stated", [])[1:])}
             for c in conversations}
    applied = {"on": False, "count": 0}
    add_turn = Conversation.add_turn

    def add_turn_marking(self, role, text, time=None, speaker=None):
        turn = add_turn(self, role, text, time, speaker)
        earlier = marks.get(self.id, {}).get(turn.index)
        if applied["on"] and earlier is not None:
            self.supersede(earlier, turn.index)
            applied["count"] += 1
        return turn

    Conversation.add_turn = add_turn_marking
    out = {}
    for name, on in (("cue rule only", False), ("with corrections marked", True)):
        applied["on"] = on
        start = time.perf_counter()
        report = evaluate(conversations, EvalConfig(oracle=False))
        summary = summarize(report.results)
        updates = [r for r in report.results if r.latest is not None]
        out[name] = {
            "probes": summary["probes"], "update_probes": len(updates),
            "latest_value_rate": summary["latest_value_rate"],
            "update_page_selection": round(statistics.mean(
                float(bool(set(r.injected_pages) & set(r.evidence_pages))) for r in updates), 4) if updates else None,
            "e2e_accuracy": summary["e2e_accuracy"],
            "page_selection_accuracy": summary["page_selection_accuracy"],
            "seconds": round(time.perf_counter() - start, 1),
        }
        print(name, json.dumps(out[name]), file=sys.stderr)
    out["corrections_marked"] = applied["count"]
    return out


def encrypted_open(args) -> dict:
    from localpager.memory.api import LocalPager
    from localpager.retrieval.choices import Signal

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, key in (("plain", None), ("encrypted", "benchmark key")):
            path = Path(tmp) / f"{name}.db"
            lp = LocalPager(path, key=key)
            lp.ingest(args.dataset)
            for info in lp.conversations()[: args.conversations]:
                conv = lp.conversation(info.id)
                lp.index.update(info.id, conv.pager.evicted, conv.turns, conv.pager.bookmark)
            embedder = lp.index.embedder
            rows = {f: len(lp.store.embedding_rows(f, vectors=False)) for f in Signal}
            lp.close()
            times = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                again = LocalPager(path, key=key)
                from localpager.retrieval.index import PageIndex

                index = PageIndex(again.store, embedder)  # the embedder already loaded: only the index is timed
                for signal in Signal:
                    index.signal(signal)
                times.append((time.perf_counter() - start) * 1000)
                again.close()
            out[name] = {"vectors": rows, "open_and_index_ms_median": round(statistics.median(times), 1),
                         "runs_ms": [round(t, 1) for t in times]}
            print(name, json.dumps(out[name]), file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["corrections", "encrypted-open"])
    parser.add_argument("dataset")
    parser.add_argument("--conversations", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    result = corrections(args) if args.what == "corrections" else encrypted_open(args)
    print(json.dumps(result, indent=2))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
