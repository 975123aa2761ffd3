"""Does the local model tell pages worth remembering from the rest? (``--worth``)

Pages every generated conversation into fixed_20 pages and asks the assistant's worth question of each
closed page (small talk is decided by rule, without the model). A page holding a probe's evidence (a
planted fact) should be judged worth remembering; a page of filler should not.

    .venv/bin/python benchmarks/worth_judgement.py [--dataset results/synthetic.jsonl] [--conversations 5]
"""

from __future__ import annotations

import argparse
import time

from localpager.backends import load_backend
from localpager.backends.tokenizers import counter_for
from localpager.core.pager import PagingConfig, page_conversation
from localpager.runtime.assist import Assistant
from localpager.store.loaders import load_conversations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="results/synthetic.jsonl")
    parser.add_argument("--conversations", type=int, default=5)
    args = parser.parse_args()
    assistant, counter = Assistant(load_backend()), counter_for()
    verdicts: dict[bool, list[bool]] = {True: [], False: []}
    start = time.perf_counter()
    for conv in load_conversations(args.dataset).conversations[: args.conversations]:
        pager = page_conversation(conv.turns, counter, PagingConfig())
        evidence = {i for probe in conv.probes for i in probe.evidence}
        for page in pager.closed():
            holds_fact = any(i in evidence for i in page.turn_range)
            verdicts[holds_fact].append(assistant.worth(page.text))
    seconds = time.perf_counter() - start
    print("| pages | count | judged worth remembering |\n|---|---:|---:|")
    for holds_fact, label in ((True, "holding a planted fact"), (False, "filler only")):
        v = verdicts[holds_fact]
        print(f"| {label} | {len(v)} | {sum(v) / len(v):.2f} |" if v else f"| {label} | 0 | – |")
    print(f"\n{assistant.stats['worth'].calls} model calls, {seconds:.1f} s")


if __name__ == "__main__":
    main()
