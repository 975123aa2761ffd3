"""A year of conversation on a laptop: ingest, ranking and answer latency at 1,000 to 100,000 turns.

For each length, a generated conversation of that many turns (``lab.synthetic.generate_conversation``: its
6-8 planted facts, with their later corrections, spread over the whole length, small talk everywhere else)
is written as interchange JSONL and ingested through the library (``LocalPager.ingest``, what ``localpager
ingest`` runs) into a fresh store, and its evicted turns embedded (``Conversation.prepare``, what a first
recall would otherwise do while the user waits), in a process of its own (``extra.ingest_peak_rss_mb``; the
generated filler repeats itself, so the embedder's cache of texts counts: ``extra.distinct_texts``). Then a
new process opens the store, as a user's next session does, and asks each planted fact in every phrasing its
kind has (``FactKind.asks``); ``peak_rss_mb`` is that process's peak:

- ``rank_ms``: the decision ``ask`` makes before its model runs, alone: the selector's ``should_recall`` (the
  recall gate over the ranking) and ``select`` (the pages to inject), per question, warm (after one question
  that is not timed); ``extra.recall_api_ms_p50``: ``Conversation.recall`` (the MCP tool), which also lists
  every ranked turn;
- ``answer_ms``: a full ``ask`` (remembered: each question and answer become turns, as in a chat), warm;
- ``page_selection``: the share of questions whose decision injects the page holding the fact's newest
  statement (so that speed is never bought with recall); ``answer_contains``: the share answered with it;
- ``cold_first_answer_ms``: ``localpager ask --json`` in a new process on the stored conversation (after one
  earlier new process, not timed, so that the files saved beside the store exist: FAISS, BM25), wall time;
  ``cold_peak_rss_mb`` its own peak.

The generated conversation's filler repeats (613 distinct texts in 100,000 turns), so its ingest rate is mostly
the embedder's cache at work. ``real_text`` beside it is the same ingest and embedding of distinct text of real
length: LoCoMo's 5,882 turns (31.5 tokens on average) in order, cycled to the length with new turn indices,
each pass after the first with its number appended to every turn (" (2)"), so that no text repeats; its
``ingest_turns_per_s`` is what importing a real history costs (``--no-real-text`` skips it).

    .venv/bin/python benchmarks/scale.py [--turns 1000,10000,100000 | --quick] [--no-real-text]
        [--json results/scale.json]

The plot (latency against length, log scale) is written beside the JSON (``.png``; the ``eval`` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from localpager.lab.bench import quantile

LENGTHS = (1_000, 10_000, 100_000)
QUICK_LENGTHS = (1_000, 10_000)
SEED = 7


@dataclass
class Question:
    """One question about a planted fact: its accepted answers and the turn stating it."""

    text: str
    answers: list[str]
    evidence: int


@dataclass
class LengthResult:
    turns: int
    ingest_s: float = 0.0  # store + embed
    ingest_store_s: float = 0.0
    embed_s: float = 0.0
    ingest_turns_per_s: float = 0.0
    store_mb: float = 0.0
    peak_rss_mb: float = 0.0
    rank_ms_p50: float = 0.0
    rank_ms_p95: float = 0.0
    answer_ms_p50: float = 0.0
    answer_ms_p95: float = 0.0
    first_answer_ms: float = 0.0  # the answering process's first ask (it loads the chat model): not in answer_ms
    cold_first_answer_ms: float = 0.0
    cold_startup_ms: float = 0.0
    cold_peak_rss_mb: float = 0.0
    page_selection: float = 0.0
    answer_contains: float = 0.0
    questions: int = 0
    pages: int = 0
    evicted: int = 0
    vectors: int = 0
    extra: dict = field(default_factory=dict)


def questions_for(conv) -> list[Question]:
    """Every phrasing of every planted fact's question (the kind's ``asks``), answered by its newest value."""
    from localpager.lab.synthetic import fact_kinds

    kinds = {k.name: k for k in fact_kinds("tuning")}
    out = []
    for probe in conv.probes:
        if not probe.evidence:
            continue
        asks = kinds[probe.extra["kind"]].asks if probe.extra.get("kind") in kinds else (probe.question,)
        out += [Question(q, list(probe.answers), probe.evidence[0]) for q in dict.fromkeys(asks)]
    return out


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _store_mb(store: Path) -> float:
    files = [p for p in store.parent.glob(store.name + "*") if p.is_file() and ".kv-" not in p.name]
    return round(sum(p.stat().st_size for p in files) / 1e6, 1)


def _bar(total: int, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="turn", file=sys.stderr, mininterval=2.0)


LOCOMO = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo" / "locomo10.json"


def real_text_conversation(turns: int, conv_id: str = "scale"):
    """``turns`` turns of distinct real text: LoCoMo's turns in order, cycled, every pass after the first with its
    number appended (no text repeats), speakers kept, roles alternating by speaker, no times."""
    from localpager.core.records import Transcript, Turn

    data = json.loads(LOCOMO.read_text())
    source = [(t["speaker"], t["text"]) for c in data for k, v in sorted(c["conversation"].items())
              if k.startswith("session_") and isinstance(v, list) for t in v]
    out = []
    for i in range(turns):
        speaker, text = source[i % len(source)]
        cycle = i // len(source)
        role = "user" if i % 2 == 0 else "assistant"
        out.append(Turn(role, f"{text} ({cycle + 1})" if cycle else text, i, speaker=speaker))
    return Transcript(conv_id, out)


def ingest_worker(turns: int, workdir: Path, model: str | None, text: str = "filler") -> dict:
    """Generate one length, ingest it into a fresh store and embed it, in this process; the questions are
    written beside the store for the answering process. ``text``: ``filler`` (the generated conversation) or
    ``real`` (``real_text_conversation``: nothing asked of it)."""
    from localpager import LocalPager
    from localpager.lab.synthetic import generate_conversation
    from localpager.store.loaders import dump_jsonl

    if text == "real":
        conv = real_text_conversation(turns)
        source, store = workdir / f"scale-real-{turns}.jsonl", workdir / f"scale-real-{turns}.db"
    else:
        conv = generate_conversation(SEED, n_turns=turns, general=0, conv_id="scale")
        (workdir / f"scale-{turns}.questions.json").write_text(json.dumps([asdict(q) for q in questions_for(conv)]))
        source, store = workdir / f"scale-{turns}.jsonl", workdir / f"scale-{turns}.db"
    distinct = len({t.text for t in conv.turns})
    dump_jsonl([conv], source)
    del conv
    lp = LocalPager(store, model=model)
    start = time.perf_counter()
    report = lp.ingest(source, embed=True)
    ingest_store_s = time.perf_counter() - start
    chat = lp.conversation("scale")
    bar = _bar(sum(len(p.turn_range) for p in chat.pager.evicted), f"embed {turns}")
    start = time.perf_counter()
    vectors = chat.prepare(progress=lambda done, total: bar.update(done - bar.n))
    bar.close()
    embed_s = time.perf_counter() - start
    lp.close()
    return {"ingest_s": round(ingest_store_s + embed_s, 2), "ingest_store_s": round(ingest_store_s, 2),
            "embed_s": round(embed_s, 2), "ingest_turns_per_s": round(turns / (ingest_store_s + embed_s), 1),
            "pages": report.pages, "evicted": report.evicted, "vectors": vectors,
            "extra": {"ingest_peak_rss_mb": _peak_rss_mb(), "distinct_texts": distinct,
                      "load_average": round(os.getloadavg()[0], 2)}}


def ask_worker(turns: int, workdir: Path, model: str | None) -> dict:
    """Open the stored conversation in this process (as a user's next session does) and ask every question:
    the decision alone, then full answers; this process's peak RSS is ``peak_rss_mb``."""
    from localpager import LocalPager
    from localpager.lab.metrics import contains_answer

    questions = [Question(**q) for q in json.loads((workdir / f"scale-{turns}.questions.json").read_text())]
    store = workdir / f"scale-{turns}.db"
    lp = LocalPager(store, model=model)
    chat = lp.conversation("scale")
    page_of = {t: p.page_id for p in chat.pages for t in p.turn_range}
    start = time.perf_counter()
    decide(chat, questions[-1].text)  # loads the embedder, reads the indexes: not in rank_ms
    first_decision_ms = round((time.perf_counter() - start) * 1000, 1)
    ranks, selected, recalls = [], [], []
    for q in questions:
        start = time.perf_counter()
        injected = decide(chat, q.text)
        ranks.append((time.perf_counter() - start) * 1000)
        selected.append(page_of[q.evidence] in injected)
        start = time.perf_counter()
        chat.recall(q.text)
        recalls.append((time.perf_counter() - start) * 1000)
    start = time.perf_counter()
    chat.ask(questions[0].text)  # loads the chat model: not in answer_ms
    first_answer_ms = round((time.perf_counter() - start) * 1000, 1)
    answers, right = [], []
    for q in questions:
        start = time.perf_counter()
        answer = chat.ask(q.text)
        answers.append((time.perf_counter() - start) * 1000)
        right.append(contains_answer(answer.answer, q.answers))
    lp.close()
    return {"rank_ms_p50": quantile(ranks, 0.5), "rank_ms_p95": quantile(ranks, 0.95),
            "answer_ms_p50": quantile(answers, 0.5), "answer_ms_p95": quantile(answers, 0.95),
            "first_answer_ms": first_answer_ms, "page_selection": round(sum(selected) / len(selected), 3),
            "answer_contains": round(sum(right) / len(right), 3), "questions": len(questions),
            "store_mb": _store_mb(store), "peak_rss_mb": _peak_rss_mb(),
            "extra": {"first_decision_ms": first_decision_ms, "recall_api_ms_p50": quantile(recalls, 0.5),
                      "rank_ms": [round(x, 1) for x in ranks], "answer_ms": [round(x, 1) for x in answers]}}


def decide(chat, question: str) -> set[int]:
    """What ``ask`` decides before the model runs, as the runtime asks it of the selector: whether to page in
    (the recall gate), then the pages to inject. Returns the injected page ids."""
    pager = chat.pager
    selector = chat.held.selector(chat.id)
    selector.should_recall(question, pager)
    injections, _ = selector.select(question, [], pager, None)
    return {i.page.page_id for i in injections}


def cold_answer(store: Path, question: str, model: str | None) -> tuple[float, float, float]:
    """``localpager ask --json`` in a new process: wall ms, the part before the answer's own stages, peak RSS."""
    cmd = [sys.executable, "-m", "localpager.cli", "--store", str(store), "ask", "scale", question, "--json",
           *(["--model", model] if model else [])]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage: its peak RSS
        wall = (time.perf_counter() - start) * 1000
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        out, err = out.read(), err.read()
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed: {err[-2000:]}")
    rss = usage.ru_maxrss / 1024
    total = json.loads(out)["timings_ms"]["total"]
    return round(wall, 1), round(wall - total, 1), round(rss, 1)


def _work(stage: str, turns: int, workdir: Path, model: str | None) -> dict:
    cmd = [sys.executable, __file__, "--worker", stage, "--worker-turns", str(turns), "--workdir", str(workdir),
           *(["--model", model] if model else [])]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_length(turns: int, workdir: Path, model: str | None, real_text: bool = True) -> LengthResult:
    """One length: an ingesting process, an answering process, then two new processes asking on its store
    (the second timed); with ``real_text``, then a process ingesting as many turns of distinct real text
    (``extra.real_text``)."""
    result = LengthResult(turns)
    for stage in ("ingest", "ask"):
        part = _work(stage, turns, workdir, model)
        result.extra.update(part.pop("extra"))
        for key, value in part.items():
            setattr(result, key, value)
    if real_text:
        part = _work("ingest-real", turns, workdir, model)
        result.extra["real_text"] = {k: part[k] for k in ("ingest_s", "ingest_store_s", "embed_s",
                                                          "ingest_turns_per_s", "evicted", "vectors")} | part["extra"]
    questions = json.loads((workdir / f"scale-{turns}.questions.json").read_text())
    store = workdir / f"scale-{turns}.db"
    cold_answer(store, questions[1]["text"], model)  # the saved indexes written, the KV state saved: not timed
    result.cold_first_answer_ms, result.cold_startup_ms, result.cold_peak_rss_mb = cold_answer(
        store, questions[1]["text"], model)
    return result


def plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = sorted(int(n) for n in data["lengths"])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label in (("rank_ms_p50", "rank p50"), ("rank_ms_p95", "rank p95"), ("answer_ms_p50", "answer p50"),
                       ("answer_ms_p95", "answer p95"), ("cold_first_answer_ms", "cold first answer")):
        ax.plot(lengths, [data["lengths"][str(n)][key] for n in lengths], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("turns in the conversation")
    ax.set_ylabel("ms")
    ax.set_title(f"localpager at scale ({data['machine']['cores']} cores, load {data['machine']['load_before']})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", default=",".join(map(str, LENGTHS)))
    parser.add_argument("--quick", action="store_true", help=f"lengths {QUICK_LENGTHS} only")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--model", default=None)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--no-real-text", action="store_true", help="skip the ingest of distinct real text")
    parser.add_argument("--worker", choices=("ingest", "ingest-real", "ask"), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--worker-turns", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        if args.worker == "ingest-real":
            print(json.dumps(ingest_worker(args.worker_turns, args.workdir, args.model, text="real")))
        else:
            work = ingest_worker if args.worker == "ingest" else ask_worker
            print(json.dumps(work(args.worker_turns, args.workdir, args.model)))
        return
    lengths = QUICK_LENGTHS if args.quick else tuple(int(n) for n in args.turns.split(","))
    machine = {"cores": os.cpu_count(), "load_before": round(os.getloadavg()[0], 2)}
    results = {}
    with tempfile.TemporaryDirectory(prefix="localpager-scale-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for n in lengths:
            result = run_length(n, workdir, args.model, real_text=not args.no_real_text)
            results[str(n)] = {k: v for k, v in asdict(result).items()}
            print(f"{n} turns: " + ", ".join(f"{k} {v}" for k, v in results[str(n)].items() if k != "extra"),
                  file=sys.stderr, flush=True)
            if args.json:  # written after every length: a long run keeps what it measured
                machine["load_after"] = round(os.getloadavg()[0], 2)
                write(args.json, {"machine": machine, "lengths": results})
    if not args.json:
        print(json.dumps({"machine": machine, "lengths": results}, indent=2))
    else:
        plot({"machine": machine, "lengths": results}, args.json.with_suffix(".png"))


def write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    first = min(int(n) for n in data["lengths"])
    base = data["lengths"][str(first)]["answer_ms_p50"]
    data["targets"] = {n: {"rank_ms_p50<=50": r["rank_ms_p50"] <= 50,
                           "answer_ms_p50<=1.2x_first": r["answer_ms_p50"] <= 1.2 * base,
                           "cold_first_answer_ms<=3000": r["cold_first_answer_ms"] <= 3000,
                           "peak_rss_mb<=1024": r["peak_rss_mb"] <= 1024}
                       for n, r in data["lengths"].items()}
    path.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    main()
