"""Recall latency on the CPU, per stage, against the floor the hardware allows.

For conversations of growing length, a chat continues for a number of probe turns (some need an
evicted fact, some are small talk) under three strategies: ``paging`` (localpager), ``truncation``
(the last turns that fit the same budget) and ``full`` (as much history as the context holds, sliding
when it is full). Every turn's trace gives its stages; the same run measures llama.cpp's raw prefill
and decode rates, and a turn's floor is (tokens evaluated / prefill rate) + (tokens generated / decode
rate): the ratio to it is the overhead localpager adds. Each run starts from an empty KV cache; with
``BenchConfig.warm`` it warms up first, as ``localpager chat`` does while the user types (then the warm-up's work
is no turn's time, and only the turns' own work is compared).
``paging_vs_truncation_p50`` is paging's p50 turn over truncation's in the same run (all turns of every length;
``_by_length`` per length): what remembering costs a turn against forgetting.

``peak_rss_mb`` is the peak resident memory of the chat workload: this process after every turn, with
the chat model and the embedder loaded, read before the rerank-at-scale measurement builds its synthetic
100k-vector arrays and FAISS indexes (``peak_rss_process_mb`` is the whole run's peak, those included).
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import numpy as np

from ..core.pager import PagingConfig
from ..runtime.settings import RecallSettings
from ..runtime.trace import STAGES
from .synthetic import generate_conversation

if TYPE_CHECKING:
    from ..memory.models import ModelOptions

LENGTHS = (50, 200, 800, 3200)
QUICK_LENGTHS = (50, 200)
INDEX_SIZES = (1_000, 10_000, 100_000)
QUICK_INDEX_SIZES = (1_000, 10_000)
SMALL_TALK = ("Thanks, that helps a lot!", "Can you say that a bit more briefly?", "Haha, fair enough.",
              "What do you think I should do this weekend?", "Okay, let's move on.")


@dataclass
class BenchConfig:
    quick: bool = False
    probe_turns: int = 20
    n_ctx: int = 2048
    budget: int = PagingConfig.budget
    model: str | None = None
    seed: int = 0
    cold_turns: int = 3200  # length of the stored conversation a new process answers on
    eviction_turns: int | None = None  # turns replayed at the default budget (more at larger); None: 200 quick, 400
    eviction_budgets: tuple[int, ...] = (512, 2048)
    # True: each conversation warms up (``Conversation.warm_up(models=True)``: embedder, indexes, the chat's prompt
    # read into its KV cache) before its first question and each question waits for it to be done, as in
    # ``localpager chat``, which warms up at its prompt while the user types. False (the default): questions back to
    # back from a cold start, so the first answer's cost stays in p95_ms_with_first
    warm: bool = False
    # how the chat model loads beside ``model`` and ``n_ctx``: its backend and the backend's options, llama.cpp's
    # threads and chat template (``localpager bench``'s global options); None: the library's defaults
    loading: ModelOptions | None = None

    def model_options(self) -> ModelOptions:
        """The chat model's options: ``loading``'s, with ``model`` and ``n_ctx``."""
        from ..memory.models import ModelOptions

        return replace(self.loading or ModelOptions(), model=self.model, n_ctx=self.n_ctx)

    @property
    def eviction_runs(self) -> tuple[tuple[int, int], ...]:
        """(budget, turns) replayed to count tokens evaluated on eviction turns: more turns at larger
        budgets, so that several evictions happen."""
        turns = self.eviction_turns or (200 if self.quick else 400)
        return tuple((b, turns if b <= 512 else turns * 3 // 2) for b in self.eviction_budgets)

    @property
    def compare(self) -> int:
        """Eviction turns whose greedy answer is checked against a full re-read (costly at 2048)."""
        return 3 if self.quick else 8

    @property
    def lengths(self) -> tuple[int, ...]:
        return QUICK_LENGTHS if self.quick else LENGTHS

    @property
    def index_sizes(self) -> tuple[int, ...]:
        return QUICK_INDEX_SIZES if self.quick else INDEX_SIZES


@dataclass
class TurnTiming:
    strategy: str
    length: int
    needs_recall: bool
    total_ms: float
    floor_ms: float
    ttft_ms: float
    evaluated: int
    generated: int
    stages: dict[str, float] = field(default_factory=dict)
    turn: int = 0  # its place among the run's probe turns: 0 is the first answer on a newly opened store


def quantile(values: list[float], q: float, *, empty: float | None = 0.0) -> float | None:
    """The value below which a share ``q`` (0-1) of ``values`` lies, to 0.1: the sorted value at index
    ``floor(q * n)`` (numpy's ``method="higher"`` at 0.5 and 0.95; p50 of an even count is the upper median);
    ``empty`` for none. The one percentile of every benchmark (the serving benchmarks used a nearest-rank one until
    December 2026, which picks a neighbouring value for many counts: their figures measured before differ)."""
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 1) if values else empty


def hardware_rates(backend, reps: int = 3) -> tuple[float, float]:
    """Raw llama.cpp prefill and decode rates (tokens/s) of this model and threads, cache cold."""
    prefill, decode = [], []
    for rep in range(reps):
        text = " ".join(f"note {rep}-{i}: the quick brown fox {i * 7 % 13} jumps" for i in range(60))
        tokens = backend.tokenize(text)[:480]
        gen = backend.generate(tokens, max_tokens=48)
        prefill.append(gen.evaluated / (gen.prefill_ms / 1000))
        if len(gen.tokens) > 1:
            decode.append((len(gen.tokens) - 1) / (gen.decode_ms / 1000))
    return statistics.median(prefill), statistics.median(decode)


def _workload(length: int, turns: int, seed: int):
    conv = generate_conversation(seed, n_turns=max(length, 60))
    history = conv.turns[:length]
    probes = [p.question for p in conv.probes if p.evidence and p.evidence[0] < length - 10]
    questions, needs = [], []
    for i in range(turns):
        if probes and i % 2 == 0:
            questions.append(probes[(i // 2) % len(probes)])
            needs.append(True)
        else:
            questions.append(SMALL_TALK[i % len(SMALL_TALK)])
            needs.append(False)
    return history, questions, needs


def _strategy(name: str, config: BenchConfig) -> tuple[RecallSettings, PagingConfig]:
    if name == "paging":
        return RecallSettings(), PagingConfig(budget=config.budget)
    if name == "truncation":
        return RecallSettings(mode="never"), PagingConfig(budget=config.budget)
    # full: everything that fits; evict (slide) only a little at a time
    return RecallSettings(mode="never"), PagingConfig(budget=config.n_ctx - 260, low_watermark=0.97)


def run_turns(backend, config: BenchConfig, rates: tuple[float, float], workdir: Path,
              progress: Callable[[Iterable], Iterable] | None = None) -> list[TurnTiming]:
    from ..memory.api import LocalPager

    prefill_rate, decode_rate = rates
    jobs = [(s, n) for n in config.lengths for s in ("paging", "truncation", "full")]
    timings: list[TurnTiming] = []
    for strategy, length in progress(jobs) if progress else jobs:
        recall, paging = _strategy(strategy, config)
        history, questions, needs = _workload(length, config.probe_turns, config.seed)
        if hasattr(backend, "clear_cache"):  # every run starts cold, as a newly opened conversation does: the
            backend.clear_cache()  # one before (the same turns under another strategy) would otherwise warm it
        lp = LocalPager(workdir / f"{strategy}-{length}.db", backend=backend, options=config.model_options(),
                        recall=recall)
        chat = lp.conversation("bench", create=True, config=paging)
        for t in history:
            chat.add_turn(t.role, t.text, stamp=False)
        if config.warm:
            chat.warm_up(models=True)
        for i, (question, need) in enumerate(zip(questions, needs)):
            if config.warm:
                chat.warmed(timeout=300)  # the user types while it runs; not part of the turn's time
            trace = chat.ask(question).trace
            stages = trace.to_dict()["timings_ms"]
            floor = trace.tokens["evaluated"] / prefill_rate * 1000 + trace.tokens["generated"] / decode_rate * 1000
            timings.append(TurnTiming(
                strategy=strategy, length=length, needs_recall=need, total_ms=stages["total"], floor_ms=floor,
                ttft_ms=stages["total"] - stages["answer_decode"], evaluated=trace.tokens["evaluated"],
                generated=trace.tokens["generated"], stages={k: stages[k] for k in STAGES}, turn=i,
            ))
        lp.close()
    return timings


@dataclass
class EvictionCost:
    """Tokens the chat model evaluates on the turns right after an eviction, with the KV splice and as a
    full re-evaluation would cost, and whether the greedy continuation matches a freshly read prompt."""

    budget: int
    turns: int = 0
    evaluated: list[int] = field(default_factory=list)  # per eviction turn, with the splice
    full: list[int] = field(default_factory=list)  # per eviction turn, without it
    agree: list[bool] = field(default_factory=list)  # per compared eviction turn

    def summary(self) -> dict[str, Any]:
        return {"eviction_turns": len(self.evaluated),
                "eviction_tokens_evaluated": quantile(self.evaluated, 0.5),
                "eviction_tokens_full": quantile(self.full, 0.5),
                "eviction_ratio": round(sum(self.evaluated) / max(1, sum(self.full)), 3),
                "shift_agreement": round(sum(self.agree) / len(self.agree), 3) if self.agree else None}


def replayed_prompts(lp, chat, turns) -> Iterator[tuple[Any, list[int]]]:
    """Add ``turns`` to ``chat`` and yield, after each user turn, its pager and the chat prompt the model
    would read before answering (as tokens)."""
    runtime = lp.runtime
    for turn in turns:
        chat.add_turn(turn.role, turn.text, stamp=False)
        if turn.role != "user":
            continue
        pager = chat.counted(lp.counter())
        pager.fixed_overhead = runtime.system_tokens()
        yield pager, runtime.fit(runtime.messages(pager, None))[1]


def eviction_cost(options: ModelOptions, budget: int, n_turns: int, workdir: Path, seed: int = 0,
                  compare: int = 8, answer_tokens: int = 12) -> EvictionCost:
    """Replay a generated conversation into a paged chat at ``budget`` and read its prompt after every
    user turn, as the chat model does before answering. After each eviction, count what the KV splice
    evaluated and what a full re-read would (``Generation.shifted`` is what the splice saved), and for the
    first ``compare`` evictions check the greedy answer against a second context that reads the same
    prompt without any splice (machine-independent figures: tokens, not milliseconds). The model loads with
    ``options``, in a context of twice ``budget`` (at least 2048 tokens)."""
    from ..memory.api import LocalPager

    options = replace(options, n_ctx=max(2048, 2 * budget))
    backend = options.load()
    plain = options.load(kv_shift=False) if compare else None
    lp = LocalPager(workdir / f"evict-{budget}.db", backend=backend, options=options)
    chat = lp.conversation("evict", create=True, config=PagingConfig(budget=budget))
    result = EvictionCost(budget=budget)
    listed = None
    for pager, prompt in replayed_prompts(lp, chat, generate_conversation(seed, n_turns=n_turns).turns):
        evicted_since = listed is not None and [p.page_id for p in pager.listed] != listed
        listed = [p.page_id for p in pager.listed]
        result.turns += 1
        if not evicted_since:
            backend.generate(prompt, max_tokens=1)
            continue
        gen = backend.generate(prompt, max_tokens=answer_tokens)
        result.evaluated.append(gen.evaluated)
        result.full.append(gen.evaluated + gen.shifted)
        if plain is not None and len(result.agree) < compare:
            result.agree.append(plain.generate(prompt, max_tokens=answer_tokens).tokens == gen.tokens)
    lp.close()
    return result


def rerank_at_scale(sizes: Iterable[int], dim: int = 384, queries: int = 20) -> dict[str, dict[str, float]]:
    """Query embedding plus FAISS search (restricted to one conversation's 40 pages, and over all rows)
    at several index sizes, one FAISS thread."""
    import faiss

    from ..retrieval.embedder import default_embedder

    faiss.omp_set_num_threads(1)
    embedder = default_embedder()
    texts = [f"what did I say about item {i} last week?" for i in range(queries)]
    embedder.encode(texts[:1])
    embed_ms = []
    for t in texts:
        start = time.perf_counter()
        embedder.encode([t + " (fresh)"])
        embed_ms.append((time.perf_counter() - start) * 1000)
    rng = np.random.default_rng(0)
    out = {}
    for n in sizes:
        vectors = rng.standard_normal((n, dim), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
        index.add_with_ids(vectors, np.arange(n, dtype=np.int64))
        q = embedder.encode(texts)
        restricted, full = [], []
        for i in range(queries):
            ids = rng.choice(n, 40, replace=False).astype(np.int64)
            params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(ids))
            start = time.perf_counter()
            index.search(q[i : i + 1], 40, params=params)
            restricted.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            index.search(q[i : i + 1], 10)
            full.append((time.perf_counter() - start) * 1000)
        embed = statistics.median(embed_ms)
        out[str(n)] = {"embed_ms": round(embed, 2), "search_conversation_ms": round(statistics.median(restricted), 3),
                       "search_all_ms": round(statistics.median(full), 3),
                       "total_ms": round(embed + statistics.median(restricted), 2)}
    return out


def _wall_ms(cmd: list[str], reps: int = 3) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 1)


SMALL_TALK_ASK = "Okay, let's move on."


def _ask_once(store: Path, loading: ModelOptions, question: str, *options: str) -> dict[str, Any]:
    """``localpager ask`` in a new process, its model loading with ``loading``: its wall time, and where the time
    went (the answer's own stages from its trace; ``startup_ms`` is the rest: interpreter, imports, opening the
    store, loading models)."""
    model = loading.model
    cmd = [sys.executable, "-m", "localpager.cli", "--store", str(store), "ask", "cold", question, "--json",
           *options, *(["--model", str(model)] if model else [])]
    start = time.perf_counter()
    done = subprocess.run(cmd, env=child_env(loading), capture_output=True, text=True, check=True)
    wall = (time.perf_counter() - start) * 1000
    trace = json.loads(done.stdout)
    stages = {k: v for k, v in trace["timings_ms"].items() if v and k != "total"}
    return {"wall_ms": round(wall, 1), "startup_ms": round(wall - trace["timings_ms"]["total"], 1),
            "stages_ms": stages, "evaluated": trace["tokens"]["evaluated"], "reused": trace["tokens"]["reused"],
            "trigger": trace["trigger"]}


def cold_answers(workdir: Path, options: ModelOptions, turns: int) -> dict[str, Any]:
    """A new process, a stored conversation of ``turns`` turns (its indexes already built by an earlier
    process), to its first answer: a question answered from memory (``cold_first_answer_ms``), and small
    talk, answered from the chat prompt, without and then with the KV cache the previous process saved (the
    model loading with ``options``, in this process and in those)."""
    from ..memory.api import LocalPager
    from ..store.loaders import dump_jsonl

    store, source = workdir / "cold.db", workdir / "cold.jsonl"
    conv = generate_conversation(1, n_turns=turns)
    conv.id = "cold"
    dump_jsonl([conv], source)
    lp = LocalPager(store, options=options)
    lp.ingest(source)
    lp.close()
    probe = next(p.question for p in conv.probes if p.evidence)
    _ask_once(store, options, probe)  # builds and saves the FAISS index; not timed
    first = _ask_once(store, options, probe)
    _ask_once(store, options, SMALL_TALK_ASK, "--recall", "never")  # reads the chat prompt, saves its KV cache
    # the same conversation without the saved cache: the next answer is the same, read in full
    plain = workdir / "cold-plain.db"
    for path in store.parent.glob(store.name + "*"):
        if path.is_file() and ".kv-" not in path.name:
            shutil.copyfile(path, plain.with_name(plain.name + path.name[len(store.name):]))
    unsaved = _ask_once(plain, options, SMALL_TALK_ASK, "--recall", "never")
    resumed = _ask_once(store, options, SMALL_TALK_ASK, "--recall", "never")
    return {"turns": turns, "recall": first, "small_talk_unsaved": unsaved, "small_talk_resumed": resumed}


def child_env(options: ModelOptions) -> dict[str, str]:
    """This process's environment with ``options`` where a process the bench starts (``localpager ask``, an
    answering worker) reads them: the variables a user sets for the backend, a served model, llama.cpp's threads
    and chat template (the model itself is on the process's command line)."""
    from ..backends import BACKEND_ENV
    from ..backends.openai_http import ENV as SERVED_ENV
    from ..backends.template import CHAT_TEMPLATE_ENV

    env = dict(os.environ)
    chosen = {BACKEND_ENV: options.backend if isinstance(options.backend, str) else None,
              "LOCALPAGER_THREADS": options.threads, CHAT_TEMPLATE_ENV: options.chat_template,
              **{SERVED_ENV[key]: value for key, value in options.backend_options.items() if key in SERVED_ENV}}
    env.update({name: "1" if value is True else str(value) for name, value in chosen.items()
                if value not in (None, False, "")})
    return env


def help_ms() -> float:
    return _wall_ms([sys.executable, "-m", "localpager.cli", "--help"])


def machine(backend) -> dict[str, Any]:
    import llama_cpp

    cpu = platform.processor()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    from ..backends.llama_internals import system_info

    return {"cpu": cpu, "threads": backend.n_threads, "python": platform.python_version(),
            "llama_cpp_python": llama_cpp.__version__, "model": backend.model_name or backend.name,
            "llama_system_info": system_info()}


def summarize(timings: list[TurnTiming], config: BenchConfig) -> dict[str, Any]:
    by = lambda s, n: [t for t in timings if t.strategy == s and t.length == n]
    p50 = {s: {str(n): quantile([t.total_ms for t in by(s, n)], 0.5) for n in config.lengths}
           for s in ("paging", "truncation", "full")}
    p95 = {s: {str(n): quantile([t.total_ms for t in by(s, n)], 0.95) for n in config.lengths}
           for s in ("paging", "truncation", "full")}
    paging = [t for t in timings if t.strategy == "paging"]
    stages = {str(n): {stage: {"p50": quantile([t.stages[stage] for t in by("paging", n)], 0.5),
                               "p95": quantile([t.stages[stage] for t in by("paging", n)], 0.95)}
                       for stage in STAGES}
              for n in config.lengths}
    for n in config.lengths:
        ttft = [t.ttft_ms for t in by("paging", n)]
        stages[str(n)]["ttft"] = {"p50": quantile(ttft, 0.5), "p95": quantile(ttft, 0.95)}
    shortest, longest = str(config.lengths[0]), str(config.lengths[-1])
    later = [t.total_ms for t in paging if t.turn > 0]
    first = quantile([t.total_ms for t in paging if t.turn == 0], 0.5)
    paging_p50 = quantile([t.total_ms for t in paging], 0.5)
    truncation = [t.total_ms for t in timings if t.strategy == "truncation"]
    return {
        "paging_vs_truncation_p50": _ratio(paging_p50, quantile(truncation, 0.5)),
        "paging_vs_truncation_p50_by_length": {str(n): _ratio(p50["paging"][str(n)], p50["truncation"][str(n)])
                                               for n in config.lengths},
        "warm_answer_ms": quantile(later, 0.5),
        "p95_ms_after_first": quantile(later, 0.95),
        "p95_ms_with_first": quantile([t.total_ms for t in paging], 0.95),
        # each run's first answer (the median over lengths) against the p50 of all: the first-use cliff alone (a p95
        # of 20 turns a length is also the longest answers' decoding)
        "first_answer_ms": first,
        "first_vs_p50": _ratio(first, paging_p50),
        "ratio_to_floor": round(statistics.median(t.total_ms / t.floor_ms for t in paging if t.floor_ms), 3),
        "flatness": round(p50["paging"][longest] / p50["paging"][shortest], 3),
        "flatness_full": round(p50["full"][longest] / p50["full"][shortest], 3),
        "p50_ms": p50,
        "p95_ms": p95,
        "stages_ms": stages,
        "evaluated_tokens_p50": {s: {str(n): quantile([t.evaluated for t in by(s, n)], 0.5) for n in config.lengths}
                                 for s in ("paging", "truncation", "full")},
    }


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def report_line(result: dict[str, Any]) -> str:
    """The recall-cost line of the text report: paging's p50 turn against truncation's, in the same run."""
    by_length = ", ".join(f"{n} turns {r}" for n, r in result["paging_vs_truncation_p50_by_length"].items())
    return f"paging_vs_truncation_p50: {result['paging_vs_truncation_p50']} ({by_length})"


def _peak_rss_mb() -> float:
    """This process's peak resident set so far (ru_maxrss is in KiB on Linux)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


_LATENCY_WORKER = r"""
import json, sys, time
from localpager import LocalPager
from localpager.lab.synthetic import generate_conversation

store, n, model = sys.argv[1], int(sys.argv[2]), sys.argv[3] or None
conv = generate_conversation(11, n_turns=120)
lp = LocalPager(store, model)
chat = lp.conversation("c", create=True)
for t in conv.turns:
    chat.add_turn(t.role, t.text, stamp=False)
times = []
for i, q in enumerate([p.question for p in conv.probes][:n] * 2):
    start = time.perf_counter()
    chat.ask(q, remember=False)
    if i:  # the first answer loads the models
        times.append((time.perf_counter() - start) * 1000)
print(json.dumps({"threads": lp.backend.n_threads, "batch_threads": lp.backend.n_threads_batch, "ms": times}))
lp.close()
"""


def answer_latencies(model: str | None = None, questions: int = 6, env: dict[str, str] | None = None) -> dict[str, Any]:
    """A fresh process asks ``questions`` of a generated conversation twice each (``remember=False``): its
    threads and the milliseconds of every answer but the first (which loads the models)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, "-c", _LATENCY_WORKER, str(Path(tmp) / "t.db"), str(questions), model or ""],
                             env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def settle(limit: float = 0.5, wait: float = 240) -> None:
    """Wait until other work keeps fewer than ``limit`` cores busy over a second (``backends.cores``, which the
    default thread count reads)."""
    from ..backends.cores import busy_cores

    deadline = time.monotonic() + wait
    while (busy_cores(1.0) or 0.0) >= limit and time.monotonic() < deadline:
        time.sleep(4)


def busy_ratio(model: str | None = None, questions: int = 6, env: dict[str, str] | None = None) -> dict[str, Any]:
    """p50 answer latency beside one process that keeps a core busy (started a few seconds before, as a competing
    program would have been), over the p50 on the machine left idle; under the threads ``env`` sets."""
    settle()
    idle = answer_latencies(model, questions, env)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(3)  # running before the model loads, as a competing program would be
        loaded = answer_latencies(model, questions, env)
    finally:
        hog.kill()
        hog.wait()
    p50_idle, p50_busy = statistics.median(idle["ms"]), statistics.median(loaded["ms"])
    return {"busy_ratio": round(p50_busy / p50_idle, 2), "p50_idle_ms": round(p50_idle, 1),
            "p50_busy_ms": round(p50_busy, 1), "threads_idle": [idle["threads"], idle["batch_threads"]],
            "threads_busy": [loaded["threads"], loaded["batch_threads"]]}


def run_bench(config: BenchConfig, progress=None, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    options = config.model_options()
    backend = options.load()
    log("measuring llama.cpp's raw prefill and decode rates")
    rates = hardware_rates(backend)
    with tempfile.TemporaryDirectory() as tmp:
        timings = run_turns(backend, config, rates, Path(tmp), progress)
        chat_peak = _peak_rss_mb()
        log(report_line(summarize(timings, config)))
        log("rerank at scale")
        rerank = rerank_at_scale(config.index_sizes)
        log(f"cold first answers on a stored {config.cold_turns}-turn conversation")
        cold = cold_answers(Path(tmp), options, config.cold_turns)
        log("tokens evaluated on eviction turns")
        evictions = {str(b): eviction_cost(options, b, n, Path(tmp), compare=config.compare).summary()
                     for b, n in config.eviction_runs}
    log("answers idle and beside a busy process (threads)")
    busy = busy_ratio(config.model, 3 if config.quick else 6, env=child_env(options))
    result = {
        **summarize(timings, config),
        "rerank_ms": rerank,
        "peak_rss_mb": chat_peak,
        "peak_rss_process_mb": _peak_rss_mb(),
        "cold_first_answer_ms": cold["recall"]["wall_ms"],
        "cold_small_talk_ms": {"unsaved": cold["small_talk_unsaved"]["wall_ms"],
                               "resumed": cold["small_talk_resumed"]["wall_ms"]},
        "cold_answers": cold,
        # at the default budget when it was measured, else the first one measured
        "eviction_tokens_evaluated": evictions.get(str(config.budget), next(iter(evictions.values())))["eviction_tokens_evaluated"],
        "eviction_tokens_full": evictions.get(str(config.budget), next(iter(evictions.values())))["eviction_tokens_full"],
        "evictions": evictions,
        "help_ms": help_ms(),
        "busy_ratio": busy["busy_ratio"],
        "busy": busy,
        "floor_rates": {"prefill_tok_s": round(rates[0], 1), "decode_tok_s": round(rates[1], 1)},
        "machine": machine(backend),
        "config": {"quick": config.quick, "lengths": list(config.lengths), "probe_turns": config.probe_turns,
                   "budget": config.budget, "n_ctx": config.n_ctx, "warm": config.warm},
        "turns": [t.__dict__ for t in timings],
    }
    return result


def plot(result: dict[str, Any], path: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for strategy, series in result["p50_ms"].items():
        xs = [int(n) for n in series]
        ax.plot(xs, [series[str(n)] / 1000 for n in xs], marker="o", label=strategy)
    ax.set_xscale("log")
    ax.set_xlabel("conversation length (turns)")
    ax.set_ylabel("p50 turn latency (s)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
