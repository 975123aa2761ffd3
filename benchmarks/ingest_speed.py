"""How fast `localpager ingest --embed` stores and embeds real text: turns/s on LoCoMo and on generated text, and
how close the stored vectors are to the reference encoder.

Two sources: LoCoMo's ``locomo10.json`` (5,882 turns of real conversation, 31.5 tokens on average, hardly any
repeated) and the held-out generated conversations (``generate --phrasing heldout --seed 100``, 10 of them,
written as interchange JSONL; their filler repeats, so the embedder's cache of texts counts). Each is ingested
into a fresh store and every conversation embedded (``Conversation.prepare``), as ``localpager ingest --embed``
does, in a new process per run (nothing cached, the import of localpager not counted), in two ways:

- ``before``: page and store every conversation, then embed them (each conversation's turns encoded in this
  process while nothing else happens): the code before issue 34;
- ``now``: each conversation's evicted turns handed to the embedder as soon as it is paged
  (``LocalPager.ingest(embed=True)``, ``Embedder.encode_ahead``), encoded in a helper process while the next
  ones are paged and while the vectors of the earlier ones are stored.

The two alternate, ``--repeats`` times each, so that both meet the same load on a shared machine; medians are
reported with the load average. ``cosine``: every vector the ``now`` run stored for LoCoMo (the evicted
turns), and the default embedder's vector of every LoCoMo turn, against sentence-transformers on torch (the
reference, run last): minimum and mean.

    .venv/bin/python benchmarks/ingest_speed.py [--repeats 1] [--json results/ingest_speed.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
WAYS = ("before", "now")


def worker(source: str, fmt: str, way: str, store: str) -> dict:
    """One run in this process: ingest ``source`` into ``store`` and embed every conversation."""
    from localpager import LocalPager
    from localpager.backends.cores import free_cores

    lp = LocalPager(store)
    load, cores = os.getloadavg()[0], free_cores()
    wall, cpu = time.perf_counter(), time.process_time()
    report = lp.ingest(source, fmt, embed=way == "now")
    paged = time.perf_counter() - wall
    vectors = sum(lp.conversation(conv_id).prepare() for conv_id in report.ids)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    lp.close()
    return {"turns": report.turns, "vectors": vectors, "wall_s": round(wall, 2), "paged_s": round(paged, 2),
            "cpu_s": round(cpu, 2), "turns_per_s": round(report.turns / wall, 1), "load_average": round(load, 2),
            "free_cores": cores, "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def run(source: Path, fmt: str, way: str, store: Path) -> dict:
    for old in store.parent.glob(store.name + "*"):
        if old.is_file():
            old.unlink()
    cmd = [sys.executable, __file__, "--worker", way, "--source", str(source), "--format", fmt, "--store", str(store)]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def locomo_texts() -> list[str]:
    data = json.loads(LOCOMO.read_text())
    return [t["text"] for c in data for k, v in sorted(c["conversation"].items())
            if k.startswith("session_") and isinstance(v, list) for t in v]


def stored_vectors(store: Path) -> dict[str, np.ndarray]:
    with sqlite3.connect(store) as db:
        return {source: np.frombuffer(vector, dtype=np.float32)
                for source, vector in db.execute("select source, vector from embeddings where kind like 'turn:%'")}


def cosines(reference: dict[str, np.ndarray], vectors: dict[str, np.ndarray]) -> dict:
    values = np.array([float(vectors[t] @ reference[t]) for t in vectors])
    return {"n": len(values), "min": round(float(values.min()), 6), "mean": round(float(values.mean()), 6)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--worker", choices=WAYS, help=argparse.SUPPRESS)
    parser.add_argument("--source", help=argparse.SUPPRESS)
    parser.add_argument("--format", default="auto", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.source, args.format, args.worker, args.store)))
        return 0

    from localpager.core.modelpaths import embedder_path
    from localpager.lab.synthetic import generate_dataset
    from localpager.store.loaders import dump_jsonl

    with tempfile.TemporaryDirectory(prefix="localpager-ingest-speed-") as tmp:
        tmp = Path(tmp)
        generated = tmp / "heldout.jsonl"
        conversations = generate_dataset(10, seed=100, phrasing="heldout")
        generated_texts = [t.text for c in conversations for t in c.turns]
        dump_jsonl(conversations, generated)
        sources = {"locomo": (LOCOMO, "locomo"), "generated": (generated, "auto")}
        runs: dict[str, dict[str, list[dict]]] = {s: {w: [] for w in WAYS} for s in sources}
        for _ in range(args.repeats):
            for name, (source, fmt) in sources.items():
                for way in WAYS:
                    result = run(source, fmt, way, tmp / f"{name}-{way}.db")
                    runs[name][way].append(result)
                    print(f"{name} {way}: {result}", file=sys.stderr, flush=True)

        from sentence_transformers import SentenceTransformer  # the reference, loaded last (torch is large)

        from localpager.retrieval.embedder import Embedder

        stored = stored_vectors(tmp / "locomo-now.db")
        texts = list(dict.fromkeys(locomo_texts() + list(stored)))  # stored: with the loader's image captions
        path = embedder_path(None)
        reference_model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        reference = dict(zip(texts, reference_model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)))
        ours = dict(zip(texts, Embedder(path).encode(texts)))
        cosine = {"stored_locomo": cosines(reference, stored),
                  "every_locomo_turn": cosines(reference, ours)}

    def median(rows: list[dict], key: str) -> float:
        return round(statistics.median(r[key] for r in rows), 2)

    table = {name: {way: {k: median(rows, k) for k in ("turns_per_s", "wall_s", "paged_s", "cpu_s", "load_average",
                                                        "peak_rss_mb", "free_cores")}
                          | {"turns": rows[0]["turns"], "vectors": rows[0]["vectors"]}
                    for way, rows in by_way.items()} for name, by_way in runs.items()}
    result = {"cores": os.cpu_count(), "repeats": args.repeats, "load_average": round(os.getloadavg()[0], 2),
              "locomo_mean_tokens": 31.5, "generated_turns": len(generated_texts),
              "generated_distinct": len(set(generated_texts)), "ingest": table, "runs": runs, "cosine": cosine,
              "cosine_floor": 0.99}
    print("| source | way | turns | turns/s | wall s | of it paging s | CPU s (this process) | load average |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, by_way in table.items():
        for way, row in by_way.items():
            print(f"| {name} | {way} | {row['turns']:,} | {row['turns_per_s']:,.0f} | {row['wall_s']} | "
                  f"{row['paged_s']} | {row['cpu_s']} | {row['load_average']} |")
    for name, c in cosine.items():
        print(f"cosine to the reference, {name}: min {c['min']:.5f}, mean {c['mean']:.5f} over {c['n']:,}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))
    return 0 if min(c["min"] for c in cosine.values()) >= 0.99 else 1


if __name__ == "__main__":
    sys.exit(main())
