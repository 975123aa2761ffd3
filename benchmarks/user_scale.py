"""A person's memory at scale (issue 40): a new chat's first answer for a user of 50 conversations x 1,000 turns.

A user's store is built once per run, offline: N generated conversations of T turns each
(``lab.synthetic.generate_conversation``, a seed each: its 6-8 planted facts, with their later corrections, amid
small talk; the turns stamped a day per conversation, 30 s apart), written as one interchange JSONL and ingested
as the user's (``LocalPager.ingest(user=...)``, what ``localpager ingest --user`` runs: paging and standing facts in
one transaction per conversation) and prepared (``Conversation.prepare``, what ``ingest --embed`` runs: the evicted
turns embedded, the BM25 index built and saved beside the store, as any process that ranks a conversation of 256
turns or more leaves it), then every turn of every conversation embedded once (``PageIndex.update`` over all pages,
what a user's first question does in ``Conversation._selector``), outside every timing; the store is closed so
that the FAISS file is saved beside it. In the same store, one process then measures, on the real chat
model and embedder (``--no-model``: the tests' scripted backend, ``tests/fakes.py``, in place of the chat model, so
that everything but generation is timed; the embedder stays the real one):

1. ``first_answer``: the first ``ask`` of a NEW conversation with no user (what a first answer costs today) and
   of a NEW conversation of the user, alternately, one question each (the planted facts' questions and a few
   general ones), after one untimed ask of each kind (the models loaded, the user's turns known embedded):
   wall ms, p50 and p95, the trace's stages (``timings_ms``) at p50, and ``ratio_p50`` (user over no user;
   target <= 1.1). Each user ask adds its conversation (2 turns), so the next one embeds them (as a user
   chatting in several conversations does) and the index's per-conversation caches are worked out again;
2. the parts that grow with the user, in that process, each over the same questions: ``across_ms``
   (``user_facts.across(store, user)``), ``selector_ms`` (``Conversation._selector`` of a new conversation of the
   user, everything embedded), ``rank_ms`` (``UserRecall.closest(question)``: the question embedded and every turn
   of the other conversations scored; target p50 <= 50 ms), and ``rank_after_change_ms`` (the same, with the
   index's places of every conversation's rows to work out again first, as a forget's removal leaves them; a new
   vector only appends its place to its own conversation's);
3. ``cold``: a new process (``--worker cold``) loading the models (untimed, ``load_ms``), then asking once in a new
   conversation with no user and once in a new conversation of the user, whose conversations this process has
   not embedded yet: the first answer of a fresh process (``user_ms``: the FAISS file read and every conversation
   of the user loaded and checked; ``selector_ms`` is that part of it).

The machine's load average is printed beside the figures (other work shares its cores).

    .venv/bin/python benchmarks/user_scale.py [--conversations 50 --turns 1000 | --quick] [--no-model]
        [--questions 12] [--cold-runs 2] [--json results/user_scale.json]

``--quick``: 5 conversations of 200 turns.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from localpager.lab.bench import quantile  # noqa: E402

USER = "alice"
SEED = 11
GENERAL = ("Any tips for ironing shirts?", "What should I cook tonight?", "How do I keep basil alive indoors?",
           "How long should I boil an egg?", "What is a good stretch for a stiff neck?",
           "How do I get a red wine stain out of a carpet?", "Why does bread go stale?",
           "What is the best way to learn to juggle?", "How often should I water a cactus?",
           "What makes a good cup of tea?", "How do I keep my laptop battery healthy?",
           "What is an easy card game for two people?")  # asked of both: the first two warm the process up
MODEL_STAGES = ("prefill", "decision_decode", "injection_prefill", "answer_decode")  # the chat model's own time
START = datetime(2025, 1, 6, 9, 0, tzinfo=timezone.utc)


def conversation_id(i: int) -> str:
    return f"{USER}-{i:03d}"


def user_conversations(n: int, turns: int):
    """``n`` generated conversations of ``turns`` turns (a seed each), stamped a day apart, 30 s a turn; and the
    questions of their planted facts (each kind's first phrasing, one fact per conversation)."""
    from dataclasses import replace

    from localpager.lab.synthetic import generate_conversation

    out, questions = [], []
    for i in range(n):
        conv = generate_conversation(SEED + i, n_turns=turns, general=0, conv_id=conversation_id(i))
        day = START + timedelta(days=i)
        conv.turns = [replace(t, time=(day + timedelta(seconds=30 * t.index)).isoformat()) for t in conv.turns]
        out.append(conv)
        probes = [p for p in conv.probes if p.evidence]
        if probes:
            questions.append(probes[0].question)
    return out, questions


def open_pager(store: Path, no_model: bool):
    from localpager import LocalPager

    if not no_model:
        return LocalPager(store)
    from fakes import ScriptedBackend

    return LocalPager(store, backend=ScriptedBackend(fallback=lambda prompt, grammar: _scripted(grammar)))


def _scripted(grammar) -> str:
    from fakes import shortest_sentence

    return shortest_sentence(grammar) if grammar else "Sounds good."


def build(workdir: Path, n: int, turns: int, no_model: bool) -> dict:
    """The user's store in ``workdir``: ingested, every turn embedded, closed (its FAISS file saved)."""
    from localpager.retrieval.choices import Signal
    from localpager.store.loaders import dump_jsonl

    name = f"user-{n}x{turns}" + ("-scripted" if no_model else "")  # pages counted by the model's tokenizer
    store, meta = workdir / f"{name}.db", workdir / f"{name}.json"
    if meta.exists():  # built earlier in this run
        return json.loads(meta.read_text())
    start = time.perf_counter()
    conversations, questions = user_conversations(n, turns)
    source = workdir / f"{name}.jsonl"
    dump_jsonl(conversations, source)
    distinct = len({t.text for c in conversations for t in c.turns})
    del conversations
    generate_s = time.perf_counter() - start
    lp = open_pager(store, no_model)
    start = time.perf_counter()
    lp.ingest(source, user=USER)
    ingest_s = time.perf_counter() - start
    start = time.perf_counter()
    vectors = 0
    index = lp.held.index
    for info in lp.conversations(USER):
        conv = lp.conversation(info.id)
        vectors += conv.prepare()  # what ``ingest --embed`` runs: the evicted turns embedded, the BM25 file saved
        pager = conv.pager
        vectors += index.update(info.id, list(pager.pages), pager.turns, pager.bookmark)
    embed_s = time.perf_counter() - start
    rows = index.signal(Signal.TURN).index.ntotal
    lp.close()
    source.unlink()
    info = {"store": str(store), "questions": questions, "generate_s": round(generate_s, 2),
            "ingest_s": round(ingest_s, 2), "embed_s": round(embed_s, 2), "vectors": vectors, "turn_rows": rows,
            "distinct_texts": distinct}
    meta.write_text(json.dumps(info))
    return info


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def _stats(values: list[float]) -> dict:
    return {"p50": round(quantile(values, 0.5), 1), "p95": round(quantile(values, 0.95), 1),
            "n": len(values)}


def _stages_p50(traces: list[dict]) -> dict:
    keys = sorted({k for t in traces for k in t})
    return {k: round(quantile([t.get(k, 0.0) for t in traces], 0.5), 1) for k in keys
            if any(t.get(k, 0.0) for t in traces)}


class _Timed:
    """Wraps a method of a class, adding each call's ms to ``spent``."""

    def __init__(self, owner, name: str):
        self.owner, self.name, self.inner, self.spent = owner, name, getattr(owner, name), []
        timed = self

        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return timed.inner(*args, **kwargs)
            finally:
                timed.spent.append(_ms(start))

        setattr(owner, name, wrapper)

    def restore(self) -> None:
        setattr(self.owner, self.name, self.inner)


def measure(info: dict, questions: int, no_model: bool) -> dict:
    """Parts 1 and 2 (see the module's docstring) in this process."""
    from localpager.memory.conversation import Conversation
    from localpager.memory.user_facts import across
    from localpager.retrieval.choices import Signal

    general = max(1, questions // 3)  # a third general questions, the rest the planted facts' (all answered)
    asks = info["questions"][:questions - general] + list(GENERAL[2:2 + general])
    lp = open_pager(Path(info["store"]), no_model)
    load = time.perf_counter()
    lp.conversation("warm-nobody", create=True).ask(GENERAL[0])  # models loaded: not timed
    lp.conversation(f"{USER}-warm", create=True, user=USER).ask(GENERAL[1])  # the user's turns known embedded
    warm_ms = _ms(load)
    selector = _Timed(Conversation, "_selector")
    facts_timer = _Timed(Conversation, "_user_facts")
    runs: dict[str | None, list[dict]] = {None: [], USER: []}
    for k, question in enumerate(asks):
        for user in (None, USER) if k % 2 == 0 else (USER, None):  # alternately first: the same load for both
            chat = lp.conversation(f"new-{user or 'nobody'}-{k}", create=True, user=user)
            selector.spent.clear(), facts_timer.spent.clear()
            start = time.perf_counter()
            answer = chat.ask(question)
            wall = _ms(start)
            chat.warmed(60)  # the read-ahead after the answer (while the user reads): never in the next timing
            trace = answer.trace.to_dict()
            # the scripted model's stages are a fake clock (1 ms a token), never spent: nothing to take away
            model = 0.0 if no_model else sum(v for s, v in trace["timings_ms"].items() if s in MODEL_STAGES)
            runs[user].append({"question": question, "general": question in GENERAL, "wall": wall,
                               "outside_model": wall - model, "stages": dict(trace["timings_ms"]),
                               "decision": trace.get("decision"), "prompt_tokens": trace["tokens"].get("prompt"),
                               "selector": sum(selector.spent), "facts": sum(facts_timer.spent)})
    selector.restore(), facts_timer.restore()
    store = lp.store
    across_ms, selector_ms, rank_ms, changed_ms = [], [], [], []
    probe = lp.conversation(f"{USER}-probe", create=True, user=USER)
    turn_index = lp.held.index.signal(Signal.TURN)
    hits = []
    for question in asks:
        start = time.perf_counter()
        facts, _ = across(store, USER)
        across_ms.append(_ms(start))
        start = time.perf_counter()
        chosen = probe._selector(facts)
        selector_ms.append(_ms(start))
        recall = chosen.user_recall
        lp.held.index.embedder.clear_cache()  # the question embedded as a new one is
        start = time.perf_counter()
        found = recall.closest(question)
        rank_ms.append(_ms(start))
        hits.append(bool(found))
        # a new vector in one conversation (the chat the user is in) appends its place to that conversation's;
        # a removal (a forget) moves them all: the worst case, timed here
        turn_index.moved += 1  # what a removal moves: every conversation's places worked out again
        lp.held.index.embedder.clear_cache()
        start = time.perf_counter()
        recall.closest(question)
        changed_ms.append(_ms(start))
    others = len(recall.others)
    lp.close()
    return {"warm_up_ms": round(warm_ms, 1), "first_answer": first_answer(runs[None], runs[USER]),
        "across_ms": _stats(across_ms), "facts": len(facts), "current_facts": sum(f.current for f in facts),
        "selector_ms": _stats(selector_ms), "rank_ms": _stats(rank_ms), "rank_after_change_ms": _stats(changed_ms),
        "ranked_conversations": others, "ranked_turns": sum(len(turn_index.conversation_turns(c)[0])
                                                            for c in recall.others) if others else 0,
        "rank_found": round(sum(hits) / len(hits), 3),
    }


def first_answer(plain: list[dict], mine: list[dict]) -> dict:
    """Part 1's figures: wall ms of each kind of new conversation, all questions and by class (the planted facts'
    questions, which a user's conversation answers from their facts and one with no user cannot; general ones,
    which both answer with the model); ``outside_model_ms``: wall less the model's own stages (prefill, decode),
    so that answers of other lengths do not count; ``added_ms_p50`` the user's extra time outside the model and
    ``outside_model_ratio`` what it makes of a first answer today: (no user's p50 + added) / no user's p50, on
    the general questions (with no user the planted facts' questions get a quick "not told", written by no model)."""
    out = {}
    for name, keep in (("all", lambda r: True), ("facts", lambda r: not r["general"]),
                       ("general", lambda r: r["general"])):
        a, b = [r for r in plain if keep(r)], [r for r in mine if keep(r)]
        if not a or not b:
            continue
        wall_a, wall_b = [r["wall"] for r in a], [r["wall"] for r in b]
        out[name] = {"nobody_ms": _stats(wall_a), "user_ms": _stats(wall_b),
                     "ratio_p50": round(quantile(wall_b, 0.5) / max(quantile(wall_a, 0.5), 1e-9), 3)}
    outside_a, outside_b = [r["outside_model"] for r in plain], [r["outside_model"] for r in mine]
    added = quantile(outside_b, 0.5) - quantile(outside_a, 0.5)
    generated = [r["wall"] for r in plain if r["general"]]  # an answer the model writes: not a quick "not told"
    base = quantile(generated or [r["wall"] for r in plain], 0.5)
    out.update({
        "nobody_outside_model_ms": _stats(outside_a), "user_outside_model_ms": _stats(outside_b),
        "added_ms_p50": round(added, 1), "outside_model_ratio": round((base + added) / max(base, 1e-9), 3),
        "user_selector_in_ask_ms": _stats([r["selector"] for r in mine]),
        "user_facts_in_ask_ms": _stats([r["facts"] for r in mine]),
        "nobody_stages_p50": _stages_p50([r["stages"] for r in plain]),
        "user_stages_p50": _stages_p50([r["stages"] for r in mine]),
        "prompt_tokens_p50": {"nobody": quantile([r["prompt_tokens"] or 0 for r in plain], 0.5),
                              "user": quantile([r["prompt_tokens"] or 0 for r in mine], 0.5)},
        "runs": {"nobody": [_brief(r) for r in plain], "user": [_brief(r) for r in mine]}})
    return out


def _brief(run: dict) -> dict:
    return {"question": run["question"], "decision": run["decision"], "wall_ms": round(run["wall"], 1),
            "outside_model_ms": round(run["outside_model"], 1), "prompt_tokens": run["prompt_tokens"]}


def cold_worker(store: Path, question: str, tag: str, no_model: bool) -> dict:
    """Part 3 in this (new) process: the models loaded (untimed), a first ask with no user, then the first ask
    in a new conversation of the user, none of whose conversations this process has embedded."""
    from localpager.memory.conversation import Conversation

    start = time.perf_counter()
    lp = open_pager(store, no_model)
    models = lp.held.models
    models.runtime  # noqa: B018 - the chat model loaded
    models.embedder.encode_one("warm")
    load_ms = _ms(start)
    chat = lp.conversation(f"cold-nobody-{tag}", create=True)
    start = time.perf_counter()
    chat.ask(question)
    nobody_ms = _ms(start)
    chat.warmed(60)
    selector = _Timed(Conversation, "_selector")
    chat = lp.conversation(f"cold-{USER}-{tag}", create=True, user=USER)
    start = time.perf_counter()
    answer = chat.ask(question)
    user_ms = _ms(start)
    selector.restore()
    chat.warmed(60)
    lp.close()
    return {"load_ms": round(load_ms, 1), "nobody_ms": round(nobody_ms, 1), "user_ms": round(user_ms, 1),
            "selector_ms": round(sum(selector.spent), 1),
            "user_stages": {k: v for k, v in answer.trace.to_dict()["timings_ms"].items() if v}}


def cold(info: dict, runs: int, no_model: bool) -> dict:
    out = []
    for run in range(runs):
        cmd = [sys.executable, __file__, "--worker", "cold", "--store", info["store"], "--tag", str(run),
               "--question", info["questions"][run % len(info["questions"])], *(["--no-model"] if no_model else [])]
        done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
        out.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {"runs": out, "nobody_ms_p50": round(quantile([r["nobody_ms"] for r in out], 0.5), 1),
            "user_ms_p50": round(quantile([r["user_ms"] for r in out], 0.5), 1),
            "selector_ms_p50": round(quantile([r["selector_ms"] for r in out], 0.5), 1)}


def table(result: dict) -> str:
    m = result["measured"]
    first = m["first_answer"]
    rows = []
    for name in ("all", "facts", "general"):
        if name in first:
            rows += [(f"first answer ({name} questions), no user", first[name]["nobody_ms"]),
                     (f"first answer ({name} questions), {USER}", first[name]["user_ms"])]
    rows += [("  outside the model, no user", first["nobody_outside_model_ms"]),
             (f"  outside the model, {USER}", first["user_outside_model_ms"]),
             ("  of which _selector", first["user_selector_in_ask_ms"]),
             ("  of which the user's facts (_user_facts)", first["user_facts_in_ask_ms"]),
             ("user_facts.across", m["across_ms"]), ("_selector set-up (embedded)", m["selector_ms"]),
             ("UserRecall.closest (rank)", m["rank_ms"]),
             ("UserRecall.closest after a change", m["rank_after_change_ms"])]
    lines = [f"{result['conversations']} conversations x {result['turns']} turns of {USER} "
             f"({m['ranked_turns']} turns ranked, {m['facts']} facts), "
             f"{'scripted chat model' if result['no_model'] else 'real chat model'}, "
             f"load {result['machine']['load_before']} -> {result['machine']['load_after']} "
             f"on {result['machine']['cores']} cores",
             f"{'':48} {'p50 ms':>9} {'p95 ms':>9}"]
    lines += [f"{name:48} {s['p50']:>9} {s['p95']:>9}" for name, s in rows]
    ratios = ", ".join(f"{name} {first[name]['ratio_p50']}" for name in ("all", "facts", "general") if name in first)
    lines.append(f"ratio p50 (user / no user): {ratios}; outside the model: +{first['added_ms_p50']} ms = "
                 f"{first['outside_model_ratio']}x a first answer today (target <= 1.1)")
    lines.append(f"rank p50 {m['rank_ms']['p50']} ms over {m['ranked_turns']} turns (target <= 50)")
    c = result["cold"]
    if c["runs"]:
        lines.append(f"cold process (models loaded first): first ask no user {c['nobody_ms_p50']} ms, first ask "
                     f"of {USER} {c['user_ms_p50']} ms (its _selector {c['selector_ms_p50']} ms), "
                     f"{len(c['runs'])} runs")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="5 conversations of 200 turns")
    parser.add_argument("--questions", type=int, default=12)
    parser.add_argument("--cold-runs", type=int, default=2)
    parser.add_argument("--no-model", action="store_true", help="the scripted chat model (tests/fakes.py)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the built store here (reused if built)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--worker", choices=("cold",), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--question", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--tag", default="0", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "cold":
        print(json.dumps(cold_worker(args.store, args.question, args.tag, args.no_model)))
        return
    n, turns = (5, 200) if args.quick else (args.conversations, args.turns)
    machine = {"cores": os.cpu_count(), "load_before": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory(prefix="localpager-user-scale-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        info = build(workdir, n, turns, args.no_model)
        print(f"built: {json.dumps({k: v for k, v in info.items() if k != 'questions'})}", file=sys.stderr, flush=True)
        measured = measure(info, args.questions, args.no_model)
        cold_part = cold(info, args.cold_runs, args.no_model)
    machine["load_after"] = round(os.getloadavg()[0], 2)
    result = {"conversations": n, "turns": turns, "no_model": args.no_model, "machine": machine,
              "build": {k: v for k, v in info.items() if k not in ("store", "questions")},
              "measured": measured, "cold": cold_part,
              "targets": {"first_answer_ratio_p50<=1.1": measured["first_answer"]["all"]["ratio_p50"] <= 1.1,
                          "outside_model_ratio<=1.1": measured["first_answer"]["outside_model_ratio"] <= 1.1,
                          "rank_ms_p50<=50": measured["rank_ms"]["p50"] <= 50}}
    print(table(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
