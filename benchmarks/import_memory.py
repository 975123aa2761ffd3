"""Issue 41's bar Z: a person's history exported from ChatGPT and from Claude, imported, and what it remembers.

Each generated person (``lab.synthetic.generate_dataset``, held-out phrasings by default: facts planted in small
talk, one or two of them changed later) is cut into ``--parts`` conversations with increasing dates, a few days
apart, as a person's chats are. One planted fact more is said "yesterday" in the second chat. The person's
history is written as both services' exports, from their formats' documentation:

- ChatGPT's ``conversations.json``: message trees (``mapping``, ``current_node``), each conversation with a
  hidden system message, an edited user message (its abandoned branch holds a draft and the reply to it) and a
  regenerated reply: the abandoned texts are unique strings, checked in no byte of the store;
- Claude's ``conversations.json``: ``chat_messages`` with ``parent_message_uuid``, each conversation with a
  regenerated reply left on an abandoned branch.

For each format, every person's export (its ``.zip``, as downloaded) is ingested as that person's user into a
fresh store with the real model's tokenizer and the real embedder, and measured against bar Z:

- every conversation stored under the user with exactly its visible turns;
- the abandoned branches' text in no byte of the store's files (every file under the store's folder, read after
  the questions below, with a kept text found there as a check that the grep reads what is stored);
- the user's standing facts (``User.facts``) hold >= 80% of the planted values, a changed one with its newest
  value (and no older one current);
- the fact said "yesterday" answered, in a new conversation of the user, with its day in words;
- a new conversation of the user answers the planted facts' questions with e2e >= 0.60 (asked as the eval's
  split mode asks them: ``lab.evaluate._ask``, scored by ``contains_answer``);
- the same export's ``conversations.json`` ingested again adds 0 turns;
- a damaged (truncated) export through the command line: one line on stderr, no traceback, exit != 0, 0 turns.

As a control, the same chats with the same times are ingested as localpager's own JSONL (``plain_ingest_facts``):
the standing facts' figures there are what the import should match.

    .venv/bin/python benchmarks/import_memory.py [--n 6] [--quick] [--json results/import_memory.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from localpager.core.dates import MONTHS, day_label
from localpager.core.records import Probe, Transcript
from localpager.lab.evaluate import EvalConfig, _ask, _settings, planted_values, summarize
from localpager.lab.metrics import contains_answer
from localpager.lab.split import parts

FORMATS = ("chatgpt", "claude")
BAR = {"facts_held": 0.80, "e2e": 0.60}
START = datetime(2024, 2, 5, 12, 0, tzinfo=timezone.utc)  # noon: a message's day is the same in any time zone
PERSON_GAP = 5  # days between two people's first chats
PART_GAP = 9  # days between two chats of one person
CLAUDE_ROOT = "00000000-0000-4000-8000-000000000000"
# what a person did "yesterday" (said in their second chat) and the question asking when
YESTERDAY = [
    ("repainted the garden shed a deep teal", "When did I repaint the garden shed?"),
    ("signed up for a pottery course at the community centre", "When did I sign up for the pottery course?"),
    ("replaced the rusty chain on my old bicycle", "When did I replace the chain on my bicycle?"),
    ("planted three lemon trees in big clay pots", "When did I plant the lemon trees?"),
    ("finished reading a thick novel about lighthouse keepers", "When did I finish the novel about lighthouse keepers?"),
    ("got my passport renewed at the town hall", "When did I get my passport renewed?"),
    ("sold my old upright piano to a neighbour", "When did I sell my old piano?"),
    ("climbed the hill behind the reservoir at dawn", "When did I climb the hill behind the reservoir?"),
]


@dataclass
class Chat:
    """One conversation of a person's export: its export id, start, and visible (role, text) turns."""

    export_id: str
    title: str
    start: datetime
    turns: list[tuple[str, str]]


@dataclass
class Person:
    user: str
    conv: Transcript  # the generated conversation, with its probes
    chats: list[Chat]
    yesterday: Probe  # the fact said "yesterday": its answers are the day in words
    abandoned: list[str] = field(default_factory=list)  # unique texts on abandoned branches (ChatGPT, Claude)


def day_forms(day) -> list[str]:
    """A day in words as an answer may give it: "2 March 2024", "March 2, 2024", "2nd March 2024"..."""
    month = MONTHS[day.month - 1]
    nth = f"{day.day}{'th' if 10 <= day.day % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(day.day % 10, 'th')}"
    return [day_label(day), f"{month} {day.day}, {day.year}", f"{nth} {month} {day.year}",
            f"{nth} of {month} {day.year}", f"{month} {nth}, {day.year}"]


def people(n: int, seed: int, n_turns: int, phrasing: str, k: int) -> list[Person]:
    from localpager.lab.synthetic import generate_dataset

    out = []
    for p, conv in enumerate(generate_dataset(n, seed=seed, n_turns=n_turns, phrasing=phrasing, revisiting=False)):
        user = f"person-{p}"
        event, question = YESTERDAY[p % len(YESTERDAY)]
        chats = []
        for i, part in enumerate(parts(conv.id, conv.turns, k)):
            turns = [(t.role, t.text) for t in conv.turns[part.start:part.stop]]
            start = START + timedelta(days=p * PERSON_GAP + i * PART_GAP)
            if i == 1:  # the fact said "yesterday", after the chat's first exchange
                turns[2:2] = [("user", f"Yesterday I {event}."), ("assistant", "That sounds like a good day.")]
                said = start.date() - timedelta(days=1)
                yesterday = Probe(question, day_forms(said), [], "yesterday", extra={"day": day_label(said)})
            chats.append(Chat(str(uuid.UUID(int=random.Random(f"{seed}:{p}:{i}").getrandbits(128), version=4)),
                              f"Chat {i + 1} of {user}", start, turns))
        out.append(Person(user, conv, chats, yesterday))
    return out


# --- the exports ------------------------------------------------------------------------------------------------


def chatgpt_export(person: Person) -> list[dict]:
    """ChatGPT's conversations.json for ``person``: each chat a message tree whose path to ``current_node`` is
    its visible turns; the abandoned branches (an edited first question with the reply to it, a regenerated
    second reply) hold unique texts, recorded in ``person.abandoned``."""
    convs = []
    for c, chat in enumerate(person.chats):
        t0 = chat.start.timestamp()
        mapping = {"client-created-root": {"id": "client-created-root", "message": None, "parent": None,
                                           "children": []}}

        def add(node_id, parent, role, content, t, hidden=False, recipient="all"):
            message = {"id": node_id, "author": {"role": role, "name": None, "metadata": {}}, "create_time": t,
                       "update_time": None, "content": content, "status": "finished_successfully", "end_turn": True,
                       "weight": 1.0, "metadata": ({"is_visually_hidden_from_conversation": True} if hidden
                                                   else {"model_slug": "gpt-4o"}), "recipient": recipient}
            mapping[node_id] = {"id": node_id, "message": message, "parent": parent, "children": []}
            mapping[parent]["children"].append(node_id)
            return node_id

        parent = add(f"{chat.export_id}-system", "client-created-root", "system",
                     {"content_type": "text", "parts": [""]}, None, hidden=True)
        for i, (role, text) in enumerate(chat.turns):
            t = t0 + 60 * (i + 1)
            if i == 0:  # edited: the first version, and the reply it got, are an abandoned branch
                draft = f"Abandoned draft {person.user} chat {c} quixotic-marmalade-{chat.export_id[:8]}."
                reply = f"Reply to an abandoned draft {person.user} chat {c} velvet-obelisk-{chat.export_id[:8]}."
                node = add(f"{chat.export_id}-{i}-draft", parent, role, {"content_type": "text", "parts": [draft]}, t)
                add(f"{chat.export_id}-{i}-draft-reply", node, "assistant",
                    {"content_type": "text", "parts": [reply]}, t + 30)
                person.abandoned += [draft, reply]
            if i == 3 and role == "assistant":  # regenerated: the first reply is abandoned
                first = f"Regenerated away {person.user} chat {c} saffron-turbine-{chat.export_id[:8]}."
                add(f"{chat.export_id}-{i}-regen", parent, role, {"content_type": "text", "parts": [first]}, t)
                person.abandoned.append(first)
            parent = add(f"{chat.export_id}-{i}", parent, role, {"content_type": "text", "parts": [text]}, t)
        convs.append({"title": chat.title, "create_time": t0, "update_time": t0 + 60 * (len(chat.turns) + 1),
                      "mapping": mapping, "moderation_results": [], "current_node": parent, "plugin_ids": None,
                      "conversation_id": chat.export_id, "id": chat.export_id, "is_archived": False})
    return convs


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def claude_export(person: Person) -> list[dict]:
    """Claude's conversations.json for ``person``: ``chat_messages`` linked by ``parent_message_uuid``, a
    regenerated second reply left on an abandoned branch (its text recorded in ``person.abandoned``)."""
    convs = []
    for c, chat in enumerate(person.chats):
        messages, parent = [], CLAUDE_ROOT
        for i, (role, text) in enumerate(chat.turns):
            when = iso(chat.start + timedelta(seconds=60 * (i + 1)))
            sender = "human" if role == "user" else "assistant"
            if i == 3 and role == "assistant":  # a reply regenerated: the first one is an abandoned branch
                first = f"Retried away {person.user} chat {c} copper-lantern-{chat.export_id[:8]}."
                messages.append({"uuid": f"{chat.export_id[:24]}-r{i:06d}", "text": first,
                                 "content": [{"type": "text", "text": first}], "sender": sender,
                                 "created_at": when, "updated_at": when, "attachments": [], "files": [],
                                 "parent_message_uuid": parent})
                person.abandoned.append(first)
            mid = f"{chat.export_id[:24]}-m{i:06d}"
            messages.append({"uuid": mid, "text": text, "content": [{"type": "text", "text": text}], "sender": sender,
                             "created_at": when, "updated_at": when, "attachments": [], "files": [],
                             "parent_message_uuid": parent})
            parent = mid
        convs.append({"uuid": chat.export_id, "name": chat.title, "created_at": iso(chat.start),
                      "updated_at": iso(chat.start + timedelta(seconds=60 * (len(chat.turns) + 1))),
                      "account": {"uuid": "a0000000-0000-4000-8000-000000000000"}, "chat_messages": messages})
    return convs


def stored_id(fmt: str, chat: Chat) -> str:
    return f"{fmt}-{chat.export_id}"


def write_export(folder: Path, fmt: str, person: Person) -> tuple[Path, Path]:
    """The export as a ``conversations.json`` and as the ``.zip`` a download is (with files the import skips)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = chatgpt_export(person) if fmt == "chatgpt" else claude_export(person)
    path = folder / "conversations.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    archive = folder / f"{fmt}-export.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(path, "conversations.json")
        z.writestr("user.json", json.dumps({"id": person.user}))
        if fmt == "chatgpt":
            z.writestr("chat.html", "<html><body>export</body></html>")
    return path, archive


# --- measuring --------------------------------------------------------------------------------------------------


def store_bytes(folder: Path) -> bytes:
    """Every file under the store's folder, read as bytes (the database, its WAL, FAISS and BM25 files...)."""
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def planted(person: Person) -> list[Probe]:
    """The generated person's fact questions (one per planted fact)."""
    return [p for p in person.conv.probes if p.evidence and "kind" in p.extra]


def facts_figures(lp, person: Person) -> dict:
    """Of the planted facts: how many values the user's current standing facts hold; of the changed ones, how many
    hold the newest value, and how many still list an older value as current too (the two statements in other
    words, in two conversations: the answer then picks the newer at read time, ``answers.latest_value_rate``)."""
    texts = [f.text for f in lp.user(person.user).facts()]
    held = [any(contains_answer(t, p.answers) for t in texts) for p in planted(person)]
    changed = [p for p in planted(person) if p.extra.get("old_answers")]
    newest = [any(contains_answer(t, p.answers) for t in texts) for p in changed]
    stale = [any(contains_answer(t, p.extra["old_answers"]) for t in texts) for p in changed]
    return {"planted": len(held), "held": sum(held), "changed": len(changed), "newest": sum(newest),
            "old_still_current": sum(stale)}


def damaged(export: Path, user: str, folder: Path) -> dict:
    """A truncated export through the command line, into a fresh store: what it prints and stores."""
    bad, store = folder / "conversations.json", folder / "s.db"
    folder.mkdir(parents=True, exist_ok=True)
    data = export.read_bytes()
    bad.write_bytes(data[:int(len(data) * 0.6)])
    cli = [sys.executable, "-m", "localpager.cli", "--store", str(store)]
    proc = subprocess.run([*cli, "--user", user, "ingest", str(bad)], capture_output=True, text=True)
    stored = 0
    if store.exists():
        listed = subprocess.run([*cli, "conversations", "--json"], capture_output=True, text=True, check=True)
        stored = sum(c["turns"] for c in json.loads(listed.stdout))
    lines = proc.stderr.strip().splitlines()
    return {"exit": proc.returncode, "stderr_lines": len(lines), "traceback": "Traceback" in proc.stderr,
            "turns_stored": stored, "message": lines[-1] if lines else ""}


def run_format(fmt: str, persons: list[Person], work: Path, backend, embedder) -> dict:
    from localpager import LocalPager
    from localpager.memory.models import ModelOptions

    config = EvalConfig(oracle=False)
    recall, rerank, paging = _settings(config)
    home = work / fmt / "store"
    home.mkdir(parents=True)
    lp = LocalPager(home / "s.db", backend=backend, options=ModelOptions(n_ctx=config.n_ctx, embedder=embedder),
                    recall=recall, rerank=rerank)
    out: dict = {"conversations": 0, "conversations_exact": 0, "turns": 0, "turns_again": 0, "wall_s": 0.0}
    facts = {"planted": 0, "held": 0, "changed": 0, "newest": 0, "old_still_current": 0}
    results, yesterday = [], []
    jsons = {}
    for person in persons:
        person.abandoned = []
        path, archive = write_export(work / fmt / "exports" / person.user, fmt, person)
        jsons[person.user] = path
        start = time.perf_counter()
        report = lp.ingest(archive, user=person.user)  # the .zip, as downloaded
        out["wall_s"] += time.perf_counter() - start
        out["turns"] += report.turns
        expected = {stored_id(fmt, chat): chat.turns for chat in person.chats}
        ids = {c.id for c in lp.user(person.user).conversations()}
        out["conversations"] += len(expected)
        out["conversations_exact"] += sum(
            conv_id in ids and [(t.role, t.text) for t in lp.store.turns(conv_id)] == turns
            for conv_id, turns in expected.items())
        out.setdefault("unexpected_conversations", 0)
        out["unexpected_conversations"] += len(ids - set(expected))
        out["turns_again"] += lp.ingest(path, user=person.user).turns  # the same export again
        for name, value in facts_figures(lp, person).items():
            facts[name] += value
    out["wall_s"] = round(out["wall_s"], 1)
    for person in persons:  # asked once every person is imported: each user's memory is their own
        asking = lp.conversation(f"{person.user}-new-chat", create=True, config=paging, user=person.user)
        values = planted_values(person.conv)
        for probe in planted(person):
            results.append(_ask(lp, asking, asking.id, probe, config, values))
        said = _ask(lp, asking, asking.id, person.yesterday, config, values)
        yesterday.append({"user": person.user, "question": person.yesterday.question,
                          "day": person.yesterday.extra["day"], "answer": said.output, "right": said.score >= 1.0})
    lp.close()
    data = store_bytes(home)
    kept = persons[0].chats[0].turns[0][1]
    out["grep_finds_kept_text"] = kept.encode() in data
    out["abandoned_texts"] = sum(len(p.abandoned) for p in persons)
    out["abandoned_in_store"] = sum(text.encode() in data for p in persons for text in p.abandoned)
    out["facts"] = {**facts, "held_rate": round(facts["held"] / max(1, facts["planted"]), 4),
                    "newest_rate": round(facts["newest"] / facts["changed"], 4) if facts["changed"] else None}
    summary = summarize(results)
    out["answers"] = {"probes": summary["probes"], "e2e_accuracy": summary["e2e_accuracy"],
                      "latest_value_rate": summary["latest_value_rate"],
                      "p50_ms": summary["latency_ms"]["p50"],
                      "rows": [{"user": r.conversation, "question": r.question, "answers": r.answers[:3],
                                "answer": r.output, "right": r.score >= 1.0, "decision": r.decision,
                                "latency_ms": r.latency_ms} for r in results]}
    out["yesterday"] = {"asked": len(yesterday), "right": sum(y["right"] for y in yesterday), "rows": yesterday}
    out["damaged"] = damaged(jsons[persons[0].user], persons[0].user, work / fmt / "damaged")
    out["bar"] = bar(out)
    return out


def plain_ingest_facts(persons: list[Person], work: Path, backend, embedder) -> dict:
    """The control: the same chats, with the same times, as localpager's own JSONL (each line its user), ingested
    plainly into a fresh store; the user's facts measured as for the exports. What the export's import loses or
    adds shows as a difference from these."""
    from localpager import LocalPager
    from localpager.memory.models import ModelOptions

    folder = work / "plain"
    folder.mkdir(parents=True)
    lines = []
    for person in persons:
        for i, chat in enumerate(person.chats):
            turns = [{"role": role, "text": text,
                      "time": (chat.start + timedelta(seconds=60 * (n + 1))).astimezone().isoformat(timespec="seconds")}
                     for n, (role, text) in enumerate(chat.turns)]
            lines.append(json.dumps({"id": f"{person.user}-chat-{i + 1}", "user": person.user, "turns": turns}))
    (folder / "chats.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    lp = LocalPager(folder / "s.db", backend=backend, options=ModelOptions(embedder=embedder))
    lp.ingest(folder / "chats.jsonl")
    facts = {"planted": 0, "held": 0, "changed": 0, "newest": 0, "old_still_current": 0}
    for person in persons:
        for name, value in facts_figures(lp, person).items():
            facts[name] += value
    lp.close()
    return {**facts, "held_rate": round(facts["held"] / max(1, facts["planted"]), 4)}


def bar(r: dict) -> dict:
    d = r["damaged"]
    return {
        "visible_turns": r["conversations_exact"] == r["conversations"] and r["unexpected_conversations"] == 0,
        "abandoned_in_no_byte": r["abandoned_in_store"] == 0 and r["grep_finds_kept_text"],
        "facts_held": r["facts"]["held_rate"] >= BAR["facts_held"],
        "newest_of_changed_held": r["facts"]["newest"] == r["facts"]["changed"],
        "yesterday_in_words": r["yesterday"]["right"] == r["yesterday"]["asked"],
        "e2e": (r["answers"]["e2e_accuracy"] or 0) >= BAR["e2e"],
        "import_again_adds_nothing": r["turns_again"] == 0,
        "zip": r["turns"] > 0,
        "damaged_file": d["exit"] != 0 and d["stderr_lines"] == 1 and not d["traceback"] and d["turns_stored"] == 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=6, help="generated people (each their own user)")
    parser.add_argument("--turns", type=int, default=160, help="turns of each person's generated history")
    parser.add_argument("--parts", type=int, default=3, help="conversations each person's history is cut into")
    parser.add_argument("--phrasing", default="heldout", help="the generator's phrasing (heldout, dev, ...)")
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--quick", action="store_true", help="2 people of 100 turns")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.n, args.turns = 2, 100
    from localpager import LocalPager

    started = time.perf_counter()
    result = {"setup": {"people": args.n, "turns": args.turns, "parts": args.parts, "phrasing": args.phrasing,
                        "seed": args.seed, "cores": os.cpu_count()}}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        loader = LocalPager(work / "models.db")  # loads the model and the embedder once, for both stores
        backend, embedder = loader.backend, loader.models.embedder
        for fmt in FORMATS:
            persons = people(args.n, args.seed, args.turns, args.phrasing, args.parts)
            result[fmt] = run_format(fmt, persons, work, backend, embedder)
            print(fmt, json.dumps({k: v for k, v in result[fmt].items() if k != "yesterday"}), file=sys.stderr)
        result["plain_ingest_facts"] = plain_ingest_facts(people(args.n, args.seed, args.turns, args.phrasing,
                                                                 args.parts), work, backend, embedder)
        loader.close()
    result["seconds"] = round(time.perf_counter() - started)
    result["load_average"] = round(os.getloadavg()[0], 2)
    result["bar_met"] = all(all(result[f]["bar"].values()) for f in FORMATS)
    print_table(result)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))


def frac(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def print_table(r: dict) -> None:
    rows = [
        ("conversations stored with exactly their visible turns", lambda f: f"{f['conversations_exact']}/{f['conversations']}"),
        ("abandoned texts found in the store's bytes", lambda f: f"{f['abandoned_in_store']}/{f['abandoned_texts']}"),
        ("planted values held by the user's facts", lambda f: f"{f['facts']['held']}/{f['facts']['planted']}"),
        ("changed facts: newest value held", lambda f: f"{f['facts']['newest']}/{f['facts']['changed']}"),
        ("changed facts: an older value still current too", lambda f: f"{f['facts']['old_still_current']}/{f['facts']['changed']}"),
        ("changed facts answered with the newest value only", lambda f: frac(f["answers"]["latest_value_rate"])),
        ('"yesterday" answered with the day in words', lambda f: f"{f['yesterday']['right']}/{f['yesterday']['asked']}"),
        ("e2e, planted facts asked in a new chat", lambda f: f"{frac(f['answers']['e2e_accuracy'])} ({f['answers']['probes']})"),
        ("turns added by the same export again", lambda f: str(f["turns_again"])),
        ("turns stored from the .zip", lambda f: str(f["turns"])),
        ("damaged file: exit, stderr lines, traceback, turns", lambda f: "{exit}, {stderr_lines}, {traceback}, "
                                                                         "{turns_stored}".format(**f["damaged"])),
    ]
    print(f"{'':54} {'chatgpt':>14} {'claude':>14}")
    for name, cell in rows:
        print(f"{name:54} {cell(r['chatgpt']):>14} {cell(r['claude']):>14}")
    c = r["plain_ingest_facts"]
    print(f"control, the same chats as plain JSONL: facts hold {c['held']}/{c['planted']} values, newest of a changed "
          f"one {c['newest']}/{c['changed']}, an older one still current {c['old_still_current']}/{c['changed']}")
    print("bar met:", {f: [k for k, ok in r[f]["bar"].items() if not ok] or "all" for f in FORMATS})


if __name__ == "__main__":
    main()
