"""A new user's first questions: advice in their own voice has the model's help, a question about themselves has
"I don't remember that". Both on the real models, in a chat with nothing said before, and in a new chat of a user
whose earlier chat told some facts (``TOLD``), as an app that opens a new chat each day has them; and in that
earlier chat itself, after the facts (asked without being stored: each question follows the facts alone).

The questions are the hand-written check set ``lab/data/personal_check.json``: its ``advice`` (a choice to be made
now: "What should I eat for dinner?", whose answer is help) and its ``personal`` (what only the user could have
told: "What was my grandfather's profession?", never said here, so "not remembered" is the one honest answer; the
model's own answer would invent one). Neither was fitted on. An answer counts "not remembered" as the evaluation
counts it (``lab.metrics.says_not_mentioned``).

    .venv/bin/python benchmarks/new_chat.py [--limit N] [--json FILE]
"""

from __future__ import annotations

import argparse
import functools
import json
import tempfile
import time
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from localpager import LocalPager
from localpager.lab.metrics import says_not_mentioned
from localpager.memory.conversation import Conversation

# What the user of the second chat told in their first one: things no check question asks about
TOLD = ["I live in Leeds with my partner Sam.", "I work as a pharmacist at a hospital.",
        "My daughter Ada is seven.", "I play the cello in a local orchestra.", "I'm allergic to penicillin.",
        "My mother's birthday is on 12 May."]


CHATS = {"empty": "new user, nothing said", "told": "new chat of a user who told six facts in an earlier one",
         "said": "the same chat, after six facts told in it"}


def check_questions() -> dict[str, list[str]]:
    data = json.loads(resources.files("localpager.lab").joinpath("data", "personal_check.json").read_text("utf-8"))
    return {"advice": data["advice"], "personal": data["personal"]}


def ask_each(questions: list[str], chat: Callable[[int], Conversation], tag: str) -> list[dict]:
    """Each question in the chat ``chat`` opens for it, not stored: its answer and how it was reached."""
    rows = []
    for i, question in enumerate(tqdm(questions, desc=tag, leave=False)):
        conv = chat(i)
        start = time.perf_counter()
        answer = conv.ask(question, remember=False)
        trace = answer.trace.to_dict()
        rows.append({"question": question, "answer": answer.answer, "not_remembered": says_not_mentioned(answer.answer),
                     "trigger": trace["trigger"], "decision": trace["decision"],
                     "seconds": round(time.perf_counter() - start, 2)})
    return rows


def summary(rows: list[dict]) -> dict:
    return {"n": len(rows), "not_remembered": round(sum(r["not_remembered"] for r in rows) / max(len(rows), 1), 3),
            "paths": dict(Counter(f"{r['trigger']}/{r['decision']}" for r in rows))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help="the first N questions of each list")
    parser.add_argument("--json", type=Path, help="write every answer and figure to this file")
    args = parser.parse_args()
    if args.json and not args.json.parent.is_dir():  # found out before minutes of answers, not after
        parser.error(f"--json: no such folder: {args.json.parent}")
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be 1 or more")
    questions = {k: v[: args.limit] for k, v in check_questions().items()}
    result: dict = {}
    with tempfile.TemporaryDirectory() as folder:
        lp = LocalPager(str(Path(folder) / "new_chat.db"))
        try:
            lp.user("told", create=True)
            first = lp.conversation("told-first", create=True, user="told")
            for line in TOLD:
                first.add_turn("user", line)
                first.add_turn("assistant", "Noted.")
            chats = {"empty": lambda tag, i: lp.conversation(f"{tag}-{i}", create=True),
                     "told": lambda tag, i: lp.conversation(f"{tag}-{i}", create=True, user="told"),
                     "said": lambda tag, i: first}  # the same chat: the questions follow the facts in it
            for scenario, opens in chats.items():
                for kind, qs in questions.items():
                    tag = f"{scenario}-{kind}"
                    rows = ask_each(qs, functools.partial(opens, tag), tag)
                    result[f"{scenario}/{kind}"] = {**summary(rows), "answers": rows}
        finally:
            lp.close()
    print("| chat | questions | n | answered \"not remembered\" |\n|---|---|---:|---:|")
    for key, r in result.items():
        scenario, kind = key.split("/")
        print(f"| {CHATS[scenario]} | {kind} | {r['n']} | {r['not_remembered']:.2f} |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
