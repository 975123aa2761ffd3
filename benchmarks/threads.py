"""How many llama.cpp threads: answer latency idle and beside one busy process, for a few settings.

llama.cpp's worker threads spin while they wait, so a process that takes every core collapses when
anything else runs: with both cores of this machine and one other busy process, a first ``ask`` took
35 s instead of 1.5 s. For each setting ``bench.busy_ratio`` starts a fresh process that asks the
same questions of one generated conversation (``remember=False``; the first answer, which loads the models, not
counted), once on an otherwise idle machine and once beside a process that keeps one core busy, and reports the
p50 and ``busy_ratio`` (p50 busy / p50 idle; ``localpager bench`` reports it for the default).
``LOCALPAGER_THREADS`` sets generation threads, ``LOCALPAGER_BATCH_THREADS`` the prompt-reading (batch)
threads; the default takes the cores other work leaves free (``localpager.backends.cores``), so each idle run
first waits until no other work keeps a core busy.

    .venv/bin/python benchmarks/threads.py [--questions 12] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from localpager.lab.bench import busy_ratio

SETTINGS = {  # name -> (generation threads, batch threads); "" leaves the default
    "default": ("", ""),
    "1 / 1": ("1", "1"),
    "2 / 2": ("2", "2"),
    "1 / 2": ("1", "2"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=6, help="questions asked twice each (first answer not counted)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = {}
    print("| threads (generation / batch) | p50 idle ms | p50 beside a busy process ms | busy_ratio |\n|---|---:|---:|---:|")
    for name, (generation, batch) in SETTINGS.items():
        env = {k: v for k, v in os.environ.items() if k not in ("LOCALPAGER_THREADS", "LOCALPAGER_BATCH_THREADS")}
        env.update({k: v for k, v in (("LOCALPAGER_THREADS", generation), ("LOCALPAGER_BATCH_THREADS", batch)) if v})
        r = busy_ratio(questions=args.questions, env=env)
        results[name] = r
        label = name if name != "default" else (f"default ({r['threads_idle'][0]} / {r['threads_idle'][1]} idle, "
                                                f"{r['threads_busy'][0]} / {r['threads_busy'][1]} busy)")
        print(f"| {label} | {r['p50_idle_ms']:,.0f} | {r['p50_busy_ms']:,.0f} | {r['busy_ratio']:.2f} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"cores": os.cpu_count(), "settings": results}, indent=1))


if __name__ == "__main__":
    main()
