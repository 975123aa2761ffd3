"""Choose the ``auto`` keyword strategy's threshold from measurements.

``auto`` keeps the heuristic keywords (plus one from the model, ``hybrid``) when they already tell the
pages apart, and lets the model choose every keyword (``llm-batch``) when they do not. How well they
tell pages apart is ``keywords.keyword_information``: the mean normalised idf of the heuristic keywords
over a keyword window (11 pages, as the pager uses). This prints it for every conversation of the
generated set and of LoCoMo, paged as by default (fixed_20), without a model.

    .venv/bin/python benchmarks/keyword_information.py [--synthetic results/synthetic.jsonl]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from localpager.backends.tokenizers import counter_for
from localpager.core.keywords import extract_keywords, keyword_information
from localpager.core.pager import KEYWORD_WINDOW, PagingConfig, page_conversation
from localpager.runtime.assist import AUTO_THRESHOLD
from localpager.store.loaders import load_conversations

LOCOMO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo" / "locomo10.json"


def information(path: str | Path) -> list[float]:
    """Per conversation: the mean information of its heuristic keywords over its keyword windows."""
    counter, values = counter_for(), []
    for conv in load_conversations(path).conversations:
        pages = [p.text for p in page_conversation(conv.turns, counter, PagingConfig()).pages]
        windows = [pages[max(0, end - KEYWORD_WINDOW - 1) : end] for end in range(2, len(pages) + 1)]
        values.append(statistics.mean(keyword_information(w, extract_keywords(w, "heuristic", 4)) for w in windows))
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthetic", default="results/synthetic.jsonl")
    parser.add_argument("--locomo", default=str(LOCOMO))
    args = parser.parse_args()
    print("| dataset | conversations | min | mean | max |\n|---|---:|---:|---:|---:|")
    for name, path in (("synthetic", args.synthetic), ("LoCoMo", args.locomo)):
        values = information(path)
        print(f"| {name} | {len(values)} | {min(values):.2f} | {statistics.mean(values):.2f} | {max(values):.2f} |")
    print(f"\nauto's threshold: {AUTO_THRESHOLD} (hybrid at or above it, llm-batch below)")


if __name__ == "__main__":
    main()
