"""How fast the default embedder embeds turns: turns/s for a few configurations, the chosen one, and how far
its vectors are from the reference (sentence-transformers on torch).

Two workloads, both from the held-out generated conversations (``generate --phrasing heldout --seed 100``):
``heldout_1024``, the first 1,024 turns as they come (generated conversations repeat their filler, so the
embedder's cache of repeated texts counts, as it does when a store is embedded), through ``Embedder.encode``
with its cache emptied before each run; and ``distinct``, the first 400 distinct turns straight through the
encoder (every turn a forward pass: what a real conversation, which rarely repeats itself, costs). Each
configuration runs ``--repeats`` times, interleaved with the others so that all meet the same load on a
shared machine; medians are reported, wall-clock turns/s and the process's CPU seconds (per core: the figure
that moves least when other processes share the cores). ``before`` is the encoder as it was before issue
26: batches of 16 texts, BLAS with its own threads, the same kernels otherwise (the kernels themselves were
made faster too: exact GELU in fewer passes, query/key/value in one product, no strided copy of the keys).
The query latency is one short question, p50 of 60, the chosen configuration against ``before``.

    .venv/bin/python benchmarks/embed_speed.py [--repeats 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from localpager.backends.cores import free_cores
from localpager.core.modelpaths import embedder_path
from localpager.lab.synthetic import generate_dataset
from localpager.retrieval.bert import NumpyBertEncoder
from localpager.retrieval.embedder import Embedder

QUERIES = ["What snack should I avoid?", "When is my dentist appointment?", "Who takes care of our parrot?",
           "How much did I budget for the trip to Lisbon next spring?"]


def heldout_turns() -> list[str]:
    conversations = generate_dataset(10, seed=100, phrasing="heldout")
    return [t.text for c in conversations for t in c.turns]


class _Before:
    """The encoder's behaviour before issue 26's changes to its batching and threads."""

    def __init__(self, encoder: NumpyBertEncoder):
        self.encoder, self.dim = encoder, encoder.dim

    def encode(self, texts, batch_size=None, threads=1):
        from localpager.retrieval import bert

        blas = bert._one_blas_thread
        bert._one_blas_thread = lambda: __import__("contextlib").nullcontext()  # BLAS keeps its own threads
        try:
            return self.encoder.encode(texts, batch_size=16, threads=1, batch_tokens=16 * 256)
        finally:
            bert._one_blas_thread = blas


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    path = embedder_path(None)
    texts = heldout_turns()
    heldout = texts[:1024]
    distinct = list(dict.fromkeys(texts))[:400]
    encoder = NumpyBertEncoder(path)
    lengths = [len(e.ids) for e in encoder.tokenizer.encode_batch(distinct)]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

    configs = {"before": (_Before(encoder), None, None)}
    for tokens in (256, 512, 1024, 2048):
        for threads in sorted({1, cores}):
            configs[f"{tokens} tokens a batch, {threads} thread{'s' if threads > 1 else ''}"] = (encoder, threads, tokens)
    chosen_threads = free_cores()
    chosen = f"{NumpyBertEncoder.BATCH_TOKENS} tokens a batch, {cores if chosen_threads > 1 else 1} thread" + (
        "s" if cores > 1 and chosen_threads > 1 else "")
    embedders = {name: Embedder(path, threads=threads or 2) for name, (_, threads, _) in configs.items()}
    for name, (model, threads, tokens) in configs.items():  # the same loaded encoder, its batching per name
        e = embedders[name]
        e._model = model if name == "before" else _Fixed(model, tokens)

    runs: dict[str, dict[str, list]] = {n: {"heldout": [], "distinct": []} for n in configs}
    for _ in range(args.repeats):
        for name, (model, threads, tokens) in configs.items():
            embedder = embedders[name]
            embedder._cache.clear()
            wall, cpu = time.perf_counter(), time.process_time()
            embedder.encode(heldout)
            runs[name]["heldout"].append((time.perf_counter() - wall, time.process_time() - cpu))
            wall, cpu = time.perf_counter(), time.process_time()
            if name == "before":
                model.encode(distinct)
            else:
                model.encode(distinct, threads=threads, batch_tokens=tokens)
            runs[name]["distinct"].append((time.perf_counter() - wall, time.process_time() - cpu))

    def rate(n: int, samples: list) -> dict:
        return {"turns_per_s": round(n / statistics.median(s[0] for s in samples), 1),
                "turns_per_cpu_s": round(n / statistics.median(s[1] for s in samples), 1)}

    table = {name: {"heldout_1024": rate(len(heldout), r["heldout"]), "distinct": rate(len(distinct), r["distinct"])}
             for name, r in runs.items()}

    before, now = [], []
    for i in range(60):  # one short query, the chosen configuration against before, interleaved
        q = QUERIES[i % len(QUERIES)] + " " * (i // len(QUERIES) % 3)
        t = time.perf_counter()
        configs["before"][0].encode([q])
        before.append(time.perf_counter() - t)
        t = time.perf_counter()
        encoder.encode([q], threads=chosen_threads)
        now.append(time.perf_counter() - t)
    rss_numpy = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    from sentence_transformers import SentenceTransformer  # the reference, loaded last (torch is large)

    reference = SentenceTransformer(str(path), device="cpu", local_files_only=True)
    sample = distinct + ["budget " * 400, "Café, résumé, naïve; 東京で会いましょう 😀", ""]
    expected = reference.encode(sample, normalize_embeddings=True, convert_to_numpy=True)
    deviation = {name: float(np.abs((encoder.encode(sample, threads=threads, batch_tokens=tokens) if name != "before"
                                     else configs["before"][0].encode(sample)) - expected).max())
                 for name, (_, threads, tokens) in configs.items()}
    runs_st = []
    for _ in range(max(1, args.repeats // 2)):
        t = time.perf_counter()
        reference.encode(heldout, batch_size=16)
        runs_st.append(time.perf_counter() - t)

    result = {
        "cores": cores, "free_cores": chosen_threads, "load_average": os.getloadavg()[0],
        "distinct_turns": len(distinct), "distinct_mean_tokens": round(float(np.mean(lengths)), 1),
        "heldout_turns": len(heldout), "heldout_distinct": len(set(heldout)),
        "configurations": table, "chosen": chosen,
        "max_abs_deviation": deviation, "tolerance": 1e-5,
        "query_ms_p50": {"before": round(1000 * statistics.median(before), 1),
                         "chosen": round(1000 * statistics.median(now), 1)},
        "sentence_transformers_heldout_turns_per_s": round(len(heldout) / statistics.median(runs_st), 1),
        "peak_rss_mb_before_torch": round(rss_numpy),
    }
    print(f"{len(heldout)} held-out turns ({len(set(heldout))} distinct), {len(distinct)} distinct turns "
          f"({result['distinct_mean_tokens']} tokens on average); load average {result['load_average']:.1f} "
          f"on {cores} cores")
    print("| configuration | held-out turns/s | distinct turns/s | distinct turns per CPU s | max deviation |")
    print("|---|---:|---:|---:|---:|")
    for name, row in table.items():
        mark = " (chosen)" if name == chosen else ""
        print(f"| {name}{mark} | {row['heldout_1024']['turns_per_s']:,.0f} | {row['distinct']['turns_per_s']:,.0f} | "
              f"{row['distinct']['turns_per_cpu_s']:,.0f} | {deviation[name]:.1e} |")
    print(f"sentence-transformers (torch), held-out: {result['sentence_transformers_heldout_turns_per_s']:,.0f} turns/s")
    print(f"one query p50: {result['query_ms_p50']['before']} ms before, {result['query_ms_p50']['chosen']} ms chosen")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))
    return 0 if max(deviation.values()) < 1e-5 else 1


class _Fixed:
    """The encoder with one batching, behind ``Embedder``."""

    def __init__(self, encoder: NumpyBertEncoder, tokens: int):
        self.encoder, self.tokens, self.dim = encoder, tokens, encoder.dim

    def encode(self, texts, batch_size=None, threads=1):
        return self.encoder.encode(texts, threads=threads, batch_tokens=self.tokens)


if __name__ == "__main__":
    sys.exit(main())
