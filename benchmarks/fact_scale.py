"""What standing facts cost as they accumulate (issue 39): ingest, append and forget with thousands of facts.

A conversation of N pairs (a user turn stating a fact, an assistant's "Noted.") where every fact fills a slot of
its own: kinds and made-up content words vary, so that no fact supersedes another (every one stays current,
the worst case for the facts a new one is compared with). On the library with no model
(``LocalPager(path, backend=NoChatModel())``), each in a fresh store:

- ``ingest_s``: the pairs written as interchange JSONL and ingested (``LocalPager.ingest``, what ``localpager
  ingest`` runs: the facts of the whole conversation made in its one transaction, ``core.facts.facts_of``);
  ``ingest_no_facts_s``: the same number of pairs stating nothing, for scale;
- ``append_s``: the pairs added one turn at a time (``Conversation.add_turn``, what ``chat`` and ``serve`` do:
  each turn's facts stored, and compared with the current ones, in its own transaction);
- ``forget_s``: ``Conversation.forget(turn=...)`` of one user turn in the middle of the ingested conversation
  with the most facts, whole (its erase of the file included); ``forget_facts_s``: the part of its write
  transaction that drops the turn's fact and works out again which fact supersedes which.

``ingest_ratio_N_M`` (and ``append_ratio_N_M``): ``ingest_s`` at N pairs over M, the smallest: linear work
grows as N/M (2 from 2,000 to 4,000), work that compares every fact with every other as its square (4). The
load average is printed beside the figures (the ratios matter more than the seconds on a shared machine).

    .venv/bin/python benchmarks/fact_scale.py [--sizes 2000,4000] [--quick] [--json FILE]

``--quick``: 500 and 1,000 pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from localpager import LocalPager  # noqa: E402
from localpager.backends.nomodel import NoChatModel  # noqa: E402
from localpager.core.records import Transcript, Turn  # noqa: E402
from localpager.store.loaders import dump_jsonl  # noqa: E402

_SYLLABLES = ("ka", "zo", "ri", "mu", "te", "va", "lo", "ni", "qua", "be", "fi", "do", "ge", "hu", "jo", "pe")
# each statement holds two made-up words of its own, its slot; the kinds vary
TEMPLATES = ("I'm allergic to {w} {v}.", "My favourite {w} is {v}.", "I take {w} {v} every morning, 20 mg.",
             "My {w} {v} lesson is every Tuesday at 6pm.", "The {w} {v} code is 4411.",
             "My budget for the {w} {v} is $900.")


def word(n: int) -> str:
    """A made-up word for ``n``: its syllables in base 16, never a real word nor a plural of another."""
    out = ""
    while True:
        n, digit = divmod(n, len(_SYLLABLES))
        out += _SYLLABLES[digit]
        if not n:
            return out + "x"


def fact_turns(pairs: int, facts: bool = True) -> list[Turn]:
    """``pairs`` user turns (each a fact of a slot of its own, or a remark stating none) with the replies."""
    turns = []
    for i in range(pairs):
        w, v = word(2 * i), word(2 * i + 1)
        text = TEMPLATES[i % len(TEMPLATES)].format(w=w, v=v) if facts else f"Hmm, {w} and {v} again."
        turns += [Turn("user", text, 2 * i), Turn("assistant", "Noted.", 2 * i + 1)]
    return turns


def open_store(path: Path) -> LocalPager:
    return LocalPager(path, backend=NoChatModel())


def time_ingest(folder: Path, pairs: int, facts: bool = True) -> tuple[float, Path]:
    """Seconds to ingest a conversation of ``pairs`` pairs into a fresh store (which is returned)."""
    source, store = folder / f"in-{pairs}-{facts}.jsonl", folder / f"ingest-{pairs}-{facts}.db"
    dump_jsonl([Transcript("c", fact_turns(pairs, facts))], source)
    lp = open_store(store)
    start = time.perf_counter()
    lp.ingest(source)
    took = time.perf_counter() - start
    if facts:
        assert len(lp.conversation("c").facts()) == pairs, "every fact should stand"
    lp.close()
    return took, store


def time_append(folder: Path, pairs: int) -> float:
    """Seconds to add ``pairs`` pairs one turn at a time (each in its own transaction) to a fresh store."""
    lp = open_store(folder / f"append-{pairs}.db")
    chat = lp.conversation("c", create=True)
    start = time.perf_counter()
    for turn in fact_turns(pairs):
        chat.add_turn(turn.role, turn.text, stamp=False)
    took = time.perf_counter() - start
    assert len(chat.facts()) == pairs, "every fact should stand"
    lp.close()
    return took


def time_forget(store: Path, pairs: int) -> tuple[float, float]:
    """Seconds for a forget of one user turn in the middle of ``store``'s conversation, and the part of its write
    transaction spent on the standing facts."""
    lp = open_store(store)
    chat = lp.conversation("c")
    chat.facts()  # the conversation loaded before the clock starts
    spent = []
    inner = type(lp.store)._forget_facts

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    lp.store._forget_facts = timed
    start = time.perf_counter()
    chat.forget(turn=2 * (pairs // 2))
    took = time.perf_counter() - start
    assert len(chat.facts()) == pairs - 1
    lp.close()
    return took, sum(spent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2000,4000", help="numbers of pairs, comma-separated")
    parser.add_argument("--quick", action="store_true", help="500 and 1,000 pairs")
    parser.add_argument("--no-append", action="store_true", help="skip the turn-by-turn runs")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    sizes = [500, 1000] if args.quick else [int(s) for s in args.sizes.split(",")]
    result: dict = {"sizes": sizes, "load_average_before": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        stores = {}
        for n in sizes:
            took, stores[n] = time_ingest(folder, n)
            result[f"ingest_s_{n}"] = round(took, 2)
            result[f"ingest_no_facts_s_{n}"] = round(time_ingest(folder, n, facts=False)[0], 2)
            if not args.no_append:
                result[f"append_s_{n}"] = round(time_append(folder, n), 2)
        big = sizes[-1]
        forget, facts_part = time_forget(stores[big], big)
        result[f"forget_s_{big}"], result[f"forget_facts_s_{big}"] = round(forget, 3), round(facts_part, 3)
    small = sizes[0]
    for n in sizes[1:]:  # linear work: n / small; work comparing every fact with every other: its square
        for what in ("ingest", "append")[: 1 if args.no_append else 2]:
            ratio = result[f"{what}_s_{n}"] / max(result[f"{what}_s_{small}"], 1e-9)
            result[f"{what}_ratio_{n}_{small}"] = round(ratio, 2)
    result["load_average_after"] = round(os.getloadavg()[0], 2)
    line = json.dumps(result)
    print(line)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(line + "\n")


if __name__ == "__main__":
    main()
