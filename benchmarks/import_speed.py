"""How fast `localpager ingest` imports a ChatGPT export, and how much memory it takes (issue 41).

A ChatGPT ``conversations.json`` of ``--size-mb`` MB is generated (conversations of 30 visible messages with an
edited user message, a regenerated reply, a hidden system message and a tool call each: what the import leaves
out is there to be read past), and the same visible turns written as interchange JSONL. Each file is ingested
into a fresh store without ``--embed``, in a new process (the import of localpager and the tokenizer's load are
not counted):

- ``export``: the ChatGPT file, found by content and read twice as a stream (``store/exports.py``);
- ``jsonl``: plain ``ingest`` of the same turns, a file read and checked whole in memory (``store/loaders.py``).

Reported for each: turns stored, wall seconds, turns/s, and the peak resident memory above the process's
baseline (its RSS just before the ingest, with localpager and the tokenizer loaded). Issue 41's bar: the export
at 200 MB takes at most 300 MB above the baseline.

Then, for the export (its conversations a user's), two questions in a new chat of that user, with the real models
(``answers_s``: each answer's seconds, the first one loading the chat model; ``embedded_turns``: the history's turns
embedded after them). Each answer embeds at most ``USER_EMBED_PER_ANSWER`` turns of the history; before, the first
answer embedded all of it (4,440 turns: 2 min 10 s on two cores).

    .venv/bin/python benchmarks/import_speed.py [--size-mb 200] [--json results/import_speed.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WAYS = ("export", "jsonl")
VISIBLE = 30  # visible messages a conversation
DAY = 86_400.0


def words(rng: random.Random, n: int) -> list[str]:
    """A made-up vocabulary: the file's text is not compressible into a few repeated strings."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(n)]


def sentence_maker(rng: random.Random):
    vocab = words(rng, 3000)

    def text() -> str:
        return " ".join(" ".join(rng.choices(vocab, k=rng.randint(6, 20))).capitalize() + "."
                        for _ in range(rng.randint(1, 4)))
    return text


def conversation(n: int, rng: random.Random, text) -> tuple[dict, list[dict]]:
    """One ChatGPT conversation and its visible turns (interchange turn objects)."""
    start = 1_600_000_000.0 + n * DAY / 3
    mapping = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    turns: list[dict] = []

    def add(node_id, parent, role, content, t, hidden=False, recipient="all"):
        message = {"id": node_id, "author": {"role": role, "name": None, "metadata": {}}, "create_time": t,
                   "content": content, "status": "finished_successfully", "end_turn": True, "weight": 1.0,
                   "metadata": {"is_visually_hidden_from_conversation": True} if hidden else {"model_slug": "gpt-4o"},
                   "recipient": recipient}
        mapping[node_id] = {"id": node_id, "message": message, "parent": parent, "children": []}
        mapping[parent]["children"].append(node_id)
        return node_id

    parent = add(f"{n}-sys", "root", "system", {"content_type": "text", "parts": [""]}, None, hidden=True)
    for i in range(VISIBLE):
        t = start + 30 * i
        role = "user" if i % 2 == 0 else "assistant"
        if i == 4:  # an edited user message: the first version's branch is abandoned
            add(f"{n}-{i}-edit", parent, role, {"content_type": "text", "parts": [text()]}, t)
        if i == 5:  # a regenerated reply: the first one is abandoned
            add(f"{n}-{i}-regen", parent, role, {"content_type": "text", "parts": [text()]}, t)
        if i == 9:  # a tool call and its output, left out
            parent = add(f"{n}-{i}-call", parent, "assistant", {"content_type": "code", "language": "python",
                                                                 "text": text()}, t, recipient="python")
            parent = add(f"{n}-{i}-out", parent, "tool", {"content_type": "execution_output", "text": text()}, t)
        said = text()
        parent = add(f"{n}-{i}", parent, role, {"content_type": "text", "parts": [said]}, t)
        turns.append({"role": role, "text": said,
                      "time": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(t))})
    conv_id = f"bench-{n:07d}"
    return ({"title": f"Conversation {n}", "create_time": start, "update_time": start + 30 * VISIBLE,
             "mapping": mapping, "moderation_results": [], "current_node": parent, "plugin_ids": None,
             "conversation_id": conv_id, "id": conv_id}, turns)


def generate(folder: Path, size_mb: float, seed: int = 41) -> tuple[Path, Path, int]:
    """The export (``conversations.json``, about ``size_mb`` MB) and its visible turns as JSONL; conversations."""
    rng = random.Random(seed)
    text = sentence_maker(rng)
    export, jsonl = folder / "conversations.json", folder / "turns.jsonl"
    n = 0
    with open(export, "w", encoding="utf-8") as out, open(jsonl, "w", encoding="utf-8") as lines:
        out.write("[")
        while out.tell() < size_mb * 1_000_000:
            conv, turns = conversation(n, rng, text)
            out.write(("," if n else "") + json.dumps(conv))
            lines.write(json.dumps({"id": f"chatgpt-{conv['id']}", "turns": turns}) + "\n")
            n += 1
        out.write("]")
    return export, jsonl, n


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


USER = "alice"
QUESTIONS = ("What did I say about the budget last time?", "And what about the trip?")


def worker(source: str, store: str, answers: bool) -> dict:
    from localpager import LocalPager

    lp = LocalPager(store)
    lp.held.models.counter().count("warm the tokenizer up")
    baseline = rss_mb()
    wall = time.perf_counter()
    report = lp.ingest(source, user=USER)
    wall = time.perf_counter() - wall
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {"conversations": report.conversations, "turns": report.turns, "wall_s": round(wall, 1),
              "turns_per_s": round(report.turns / wall), "baseline_mb": round(baseline),
              "peak_above_baseline_mb": round(peak - baseline), "load_average": round(os.getloadavg()[0], 2)}
    if answers:
        result.update(first_answers(lp))
    lp.close()
    return result


def first_answers(lp) -> dict:
    """Seconds of each of ``QUESTIONS`` asked in a new chat of the user, and the history's turns embedded then."""
    chat = lp.conversation("new-chat", create=True, user=USER)
    seconds = []
    for question in QUESTIONS:
        start = time.perf_counter()
        chat.ask(question)
        seconds.append(round(time.perf_counter() - start, 1))
    name = lp.index.embedder.name
    embedded = sum(sum(lp.store.embedded_turn_counts(info.id, name).values())
                   for info in lp.store.list_conversations(USER) if info.id != "new-chat")
    return {"answers_s": seconds, "embedded_turns": embedded}


def run(source: Path, store: Path, answers: bool = False) -> dict:
    cmd = [sys.executable, __file__, "--worker", "--source", str(source), "--store", str(store)]
    cmd += ["--answers"] if answers else []
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=200.0, help="size of the generated conversations.json")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--source", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--answers", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.source, args.store, args.answers)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        export, jsonl, n = generate(folder, args.size_mb)
        result = {"size_mb": round(export.stat().st_size / 1e6, 1), "jsonl_mb": round(jsonl.stat().st_size / 1e6, 1),
                  "conversations": n, "cores": os.cpu_count()}
        for way, source in (("export", export), ("jsonl", jsonl)):
            result[way] = run(source, folder / f"{way}.db", answers=way == "export")
            print(way, result[way], file=sys.stderr)
    result["bar_met"] = result["export"]["peak_above_baseline_mb"] <= 300  # issue 41: for a 200 MB export
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
