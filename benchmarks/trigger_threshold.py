"""Choose the similarity-triggered recall threshold from measurements.

For every probe of a generated dataset (a question that needs an evicted fact) and for every
follow-up turn of the same conversations that asks nothing of the past (the filler user turns),
compute the best similarity between the message and any turn of an evicted page. A threshold is
good when it fires for the probes and stays quiet for the small talk.

    .venv/bin/python benchmarks/trigger_threshold.py [--n 10] [--seed 0]
"""

from __future__ import annotations

import argparse

import numpy as np

from localpager.backends.tokenizers import counter_for
from localpager.core.pager import PagingConfig, page_conversation
from localpager.lab.synthetic import generate_dataset
from localpager.retrieval.embedder import default_embedder


def best_similarities(n: int, seed: int) -> tuple[list[float], list[float]]:
    embedder, counter = default_embedder(), counter_for()
    probes, chatter = [], []
    for conv in generate_dataset(n, seed=seed, revisiting=False):
        cut = len(conv.turns) - 20  # the last 20 turns are filler: use them as "new" small talk
        pager = page_conversation(conv.turns[:cut], counter, PagingConfig())
        turns = [pager.turns[i].text for p in pager.evicted for i in p.turn_range]
        evidence = {i for p in conv.probes for i in p.evidence}
        if not turns:
            continue
        t = embedder.encode(turns)
        q = embedder.encode([p.question for p in conv.probes if all(i < cut for i in p.evidence)])
        c = embedder.encode([x.text for x in conv.turns[cut:] if x.role == "user" and x.index not in evidence])
        probes += (q @ t.T).max(axis=1).tolist()
        chatter += (c @ t.T).max(axis=1).tolist()
    return probes, chatter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    probes, chatter = best_similarities(args.n, args.seed)
    print(f"{len(probes)} probes, {len(chatter)} small-talk turns")
    print("| threshold | probes recalled | small talk recalled |\n|---|---|---|")
    for th in np.arange(0.20, 0.61, 0.05):
        print(f"| {th:.2f} | {np.mean(np.array(probes) >= th):.2f} | {np.mean(np.array(chatter) >= th):.2f} |")


if __name__ == "__main__":
    main()
