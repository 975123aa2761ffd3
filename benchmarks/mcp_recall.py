"""`recall` through MCP: its latency, and whether it hands over the turn `ask` would inject.

    .venv/bin/python benchmarks/mcp_recall.py [--quick] [--json FILE]

The official SDK's client spawns ``localpager mcp`` over stdio, as a desktop app does, and times the
``recall`` tool end to end (the client's round trip):

- latency on a generated 3,200-turn conversation: the very first recall on a store never searched (it embeds
  every turn, once per store), then the time to the first recall in a new process (start, handshake, first
  call; the store's vectors already there), in eight processes serving every conversation and eight pinned to
  this one (``--conversation``: it prepares the conversation while the client connects), taken alternately,
  then warm calls in one process (distinct
  questions: the embedder caches a text it has seen), each p50/p95; beside the library's own
  ``Conversation.recall`` in this process (what the protocol and the process boundary add);
- agreement on the held-out probes (``localpager lab generate FILE --phrasing heldout --seed 100``): each probe
  is asked where the file asks it (the conversation stored up to that turn); through MCP, whether
  ``recall``'s first turn is the evidence turn, and in this process, with the real chat model,
  whether the first turn ``ask`` injects is (``ask(remember=False)``: its trace's injected turns); both rank
  with the same selector, so they should agree. General questions (no evidence) count in the gate's rate:
  how often ``recall`` says memory is relevant, and how often ``ask`` paged something in.

Writes results/mcp_recall.json (or ``--json FILE``). Run it with ``LOCALPAGER_THREADS=1`` on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from localpager.lab.bench import quantile

ROOT = Path(__file__).resolve().parent.parent
LOCALPAGER = [str(Path(sys.executable).parent / "localpager")] if (Path(sys.executable).parent / "localpager").exists() \
    else [sys.executable, "-m", "localpager.cli"]
LEAD_INS = ["", "Quick question: ", "Remind me, ", "I forgot: ", "Can you check: ", "One more thing, "]


def summary(values: list[float]) -> dict:
    return {"n": len(values), "p50": quantile(values, 0.5, empty=None), "p95": quantile(values, 0.95, empty=None),
            "mean": round(statistics.fmean(values), 1) if values else None}


def generate(path: Path, *args: str) -> None:
    subprocess.run([*LOCALPAGER, "lab", "generate", str(path), *args], check=True, stdout=subprocess.DEVNULL)


def server(store: Path, errlog, *args: str) -> stdio_client:
    params = StdioServerParameters(command=LOCALPAGER[0], args=[*LOCALPAGER[1:], "mcp", "--store", str(store), *args],
                                   env={k: v for k, v in os.environ.items()
                                        if k.startswith(("LOCALPAGER_", "HF_")) or k == "PYTHONPATH"})
    return stdio_client(params, errlog=errlog)


async def session(store: Path, errlog, calls, *args: str):
    """``await calls(client)`` on a new ``localpager mcp`` process (``args``: its options); returns (its
    result, ms from spawn to the handshake's end)."""
    started = time.perf_counter()
    async with Client(server(store, errlog, *args), mode="legacy", read_timeout_seconds=900) as client:
        ready = (time.perf_counter() - started) * 1000
        return await calls(client), ready


async def timed_recall(client, conversation: str | None, question: str, max_turns: int | None = None
                       ) -> tuple[dict, float]:
    """One ``recall`` call (``conversation`` None: a pinned server's) and its round trip in ms."""
    arguments = {"question": question} if conversation is None else {"conversation": conversation, "question": question}
    if max_turns:
        arguments["max_turns"] = max_turns
    started = time.perf_counter()
    result = await client.call_tool("recall", arguments)
    ms = (time.perf_counter() - started) * 1000
    if result.is_error:
        raise RuntimeError(f"recall failed: {result.content[0].text}")
    return result.structured_content, ms


# -- latency -----------------------------------------------------------------------------------------
def latency(work: Path, turns: int, processes: int, warm_calls: int, errlog) -> dict:
    from localpager.memory.api import LocalPager
    from localpager.store.loaders import load_conversations

    data = work / "long.jsonl"
    generate(data, "--n", "1", "--seed", "7", "--turns", str(turns))
    conv = load_conversations(data).conversations[0]
    store = work / "long.db"
    lp = LocalPager(store)
    lp.ingest(data)  # counted with the chat model's tokenizer, as a store filled by chatting is
    lp.close()
    questions = [p.question for p in conv.probes]
    asked = [f"{lead}{q[0].lower() + q[1:] if lead else q}" for lead in LEAD_INS for q in questions]

    print(f"{turns} turns stored; first recall on the store (embeds every turn) ...", file=sys.stderr)

    async def one(client):
        return await timed_recall(client, conv.id, asked[0])

    (_, first_ever_ms), ready = asyncio.run(session(store, errlog, one))

    def new_process(q: str, pinned: bool) -> tuple[float, float]:
        """(the first recall's ms, ms to the handshake's end) in a new process; pinned: --conversation."""
        args = ("--conversation", conv.id) if pinned else ()
        target = None if pinned else conv.id
        (_, ms), ready = asyncio.run(session(store, errlog, lambda c: timed_recall(c, target, q), *args))
        print(f"  new process{' (pinned)' if pinned else ''}: ready {ready:.0f} ms, first recall {ms:.0f} ms",
              file=sys.stderr)
        return ms, ready

    news, readies, pinned, pinned_readies = [], [], [], []
    for i in range(processes):  # alternately, so that both meet the same load on a shared machine
        ms, ready = new_process(asked[1 + 2 * i], pinned=False)
        news.append(ms)
        readies.append(ready)
        ms, ready = new_process(asked[2 + 2 * i], pinned=True)
        pinned.append(ms)
        pinned_readies.append(ready)
    totals = [a + b for a, b in zip(news, readies)]
    pinned_totals = [a + b for a, b in zip(pinned, pinned_readies)]
    rest = asked[1 + 2 * processes:][:warm_calls]

    async def warm(client):
        await timed_recall(client, conv.id, asked[0])  # this process's first: not counted
        return [(await timed_recall(client, conv.id, q))[1] for q in rest]

    warm_ms, _ = asyncio.run(session(store, errlog, warm))
    lp = LocalPager(store)  # the same calls in this process, through the library
    chat = lp.conversation(conv.id)
    chat.recall(asked[0])
    library_ms = []
    for q in rest:
        started = time.perf_counter()
        chat.recall(q)
        library_ms.append((time.perf_counter() - started) * 1000)
    lp.close()
    return {"turns": turns, "questions": len(rest), "first_recall_ever_ms": round(first_ever_ms, 1),
            "new_process_ready_ms": summary(readies), "new_process_first_recall_ms": summary(news),
            "new_process_to_first_recall_ms": summary(totals),
            "pinned_new_process_first_recall_ms": summary(pinned), "pinned_new_process_to_first_recall_ms":
                summary(pinned_totals), "warm_ms": summary(warm_ms),
            "library_warm_ms": summary(library_ms)}


# -- agreement on the held-out probes ---------------------------------------------------------------
def agreement(work: Path, conversations: int | None, errlog) -> tuple[dict, list[dict]]:
    """The figures, and a row per probe."""
    from localpager.memory.api import LocalPager
    from localpager.store.loaders import dump_jsonl, load_conversations

    data = work / "heldout.jsonl"
    generate(data, "--phrasing", "heldout", "--seed", "100", *(["--n", str(conversations)] if conversations else []))
    points = []  # (stored id, probe)
    stored = []
    for conv in load_conversations(data).conversations:
        at: dict[int, list] = {}
        for probe in conv.probes:
            at.setdefault(len(conv.turns) - 1 if probe.at is None else probe.at, []).append(probe)
        for turn, probes in sorted(at.items()):
            cut = f"{conv.id}@{turn}"
            stored.append(dataclasses.replace(conv, id=cut, turns=conv.turns[:turn + 1], probes=[]))
            points += [(cut, p) for p in probes]
    cuts = work / "heldout-cuts.jsonl"
    dump_jsonl(stored, cuts)
    store = work / "heldout.db"
    lp = LocalPager(store)
    lp.ingest(cuts)
    lp.close()
    print(f"held-out: {len(points)} probes at {len(stored)} points; recall through MCP ...", file=sys.stderr)

    async def recalls(client):
        return [(await timed_recall(client, cut, p.question))[0] for cut, p in points]

    recalled, _ = asyncio.run(session(store, errlog, recalls))
    print("... and ask with the chat model", file=sys.stderr)
    lp = LocalPager(store)
    asked = []
    for cut, p in points:
        trace = lp.conversation(cut).ask(p.question, remember=False).trace
        asked.append({"injected": list(trace.injected_turns), "decision": trace.decision})
    lp.close()

    rows = []
    for (cut, p), r, a in zip(points, recalled, asked):
        first = r["turns"][0]["turn"] if r["turns"] else None
        injected = [t["turn"] for t in r["turns"] if t["injected"]]
        rows.append({"conversation": cut, "question": p.question, "type": p.type, "evidence": p.evidence,
                     "recall_first": first, "recall_injected": injected, "relevant": r["relevant"],
                     "probability": r["probability"], "ask_injected": a["injected"], "ask_decision": a["decision"]})
    facts = [r for r in rows if r["evidence"]]
    general = [r for r in rows if not r["evidence"]]
    paged = [r for r in facts if r["ask_injected"]]

    def rate(items, test) -> float | None:
        return round(sum(1 for r in items if test(r)) / len(items), 4) if items else None

    return {
        "probes": len(facts), "general_questions": len(general), "points": len(stored),
        "recall_first_is_evidence": rate(facts, lambda r: r["recall_first"] in r["evidence"]),
        "ask_first_injected_is_evidence": rate(facts, lambda r: bool(r["ask_injected"]) and r["ask_injected"][0] in r["evidence"]),
        "recall_injects_evidence": rate(facts, lambda r: bool(set(r["recall_injected"]) & set(r["evidence"]))),
        "ask_injects_evidence": rate(facts, lambda r: bool(set(r["ask_injected"]) & set(r["evidence"]))),
        "ask_paged_in": rate(facts, lambda r: bool(r["ask_injected"])),
        "same_first_turn_when_ask_paged_in": rate(paged, lambda r: r["recall_first"] == r["ask_injected"][0]),
        "recall_relevant_on_probes": rate(facts, lambda r: r["relevant"]),
        "recall_relevant_on_general": rate(general, lambda r: r["relevant"]),
        "ask_paged_in_on_general": rate(general, lambda r: bool(r["ask_injected"])),
    }, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="800 turns, 2 new processes, 2 held-out conversations")
    parser.add_argument("--turns", type=int, default=None, help="turns of the long conversation (default 3200)")
    parser.add_argument("--json", default=str(ROOT / "results" / "mcp_recall.json"), help="write the results here")
    parser.add_argument("--keep", help="keep the stores in this folder (default: a temporary one)")
    args = parser.parse_args(argv)
    turns = args.turns or (800 if args.quick else 3200)
    work = Path(args.keep or tempfile.mkdtemp(prefix="mcp-recall-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        with (work / "servers-stderr.log").open("w") as errlog:
            result = {"latency": latency(work, turns, 2 if args.quick else 8, 20 if args.quick else 60, errlog)}
            result["heldout"], result["heldout_rows"] = agreement(work, 2 if args.quick else None, errlog)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    result["cpus"] = os.cpu_count()
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    lat, held = result["latency"], result["heldout"]
    print(f"recall through MCP, {lat['turns']} turns: first ever (embeds every turn) {lat['first_recall_ever_ms']:.0f} ms; "
          f"new process to first recall p50 {lat['new_process_to_first_recall_ms']['p50']} / p95 "
          f"{lat['new_process_to_first_recall_ms']['p95']} ms (of which the call p50 "
          f"{lat['new_process_first_recall_ms']['p50']} ms), pinned p50 {lat['pinned_new_process_to_first_recall_ms']['p50']} "
          f"/ p95 {lat['pinned_new_process_to_first_recall_ms']['p95']} ms; warm p50 {lat['warm_ms']['p50']} / p95 "
          f"{lat['warm_ms']['p95']} ms (the library in-process: {lat['library_warm_ms']['p50']} / "
          f"{lat['library_warm_ms']['p95']} ms)")
    print(f"held-out probes ({held['probes']}): recall's first turn is the evidence {held['recall_first_is_evidence']}, "
          f"ask's first injected turn {held['ask_first_injected_is_evidence']} (ask paged in on "
          f"{held['ask_paged_in']}); the same first turn when ask paged in: "
          f"{held['same_first_turn_when_ask_paged_in']}; relevant on general questions {held['recall_relevant_on_general']} "
          f"(ask paged in {held['ask_paged_in_on_general']})")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
