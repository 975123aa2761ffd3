"""Measuring memory: ``eval`` (answers scored, on generated conversations or one's own), ``bench`` (recall
latency on this machine) and the ``lab`` group, for experiments (``lab generate``: synthetic conversations with
planted facts; ``lab simulate``: paging policies replayed). None of them opens the store; they run
``localpager.lab``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..core.choices import (
    DEFAULT_BOOKMARK_FORMAT,
    DEFAULT_BOUNDARY,
    DEFAULT_EVICTION,
    DEFAULT_KEYWORDS,
    PARAMETRIC_BOUNDARIES,
    BookmarkFormat,
    Boundary,
    Eviction,
    KeywordStrategy,
)
from ..core.pager import DEFAULT_BUDGET
from ..lab.choices import BELADY, EvalStrategy, Phrasing, QuestionStyle, RetrieverName
from ..lab.synthetic_data import KIND_SETS, TRAINED_KINDS
from ..retrieval.choices import DEFAULT_PAGE_CHOICE, DEFAULT_SIGNAL, PageChoice, Signal
from ..runtime.choices import DEFAULT_LAYOUT, DEFAULT_TRIGGER, Layout, RecallMode, Trigger
from ..store.choices import FileFormat
from .options import (
    BoundaryName,
    ChoiceOf,
    ExperimentCommand,
    ListOf,
    boundary_name,
    experiment_option,
    list_of,
    positive_ints,
)
from .session import friendly_errors
from .settings import global_options

EVAL_RECALL_MODES = (RecallMode.AUTO, RecallMode.ALWAYS)  # never: the eval's truncation strategy


@click.group(name="lab")
def lab():
    """Experiments: synthetic conversations with planted facts (generate) and paging policies replayed over
    them (simulate). They open no store."""


@lab.command()
@click.argument("out", type=click.Path(dir_okay=False, writable=True))
@click.option("--n", "count", type=click.IntRange(min=1), default=10, show_default=True, help="conversations to generate")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--turns", type=int, default=160, show_default=True, help="turns per conversation")
@click.option("--revisiting/--forward", default=None,
              help="probes asked during the conversation / at the end (default: alternate)")
@click.option("--phrasing", type=ChoiceOf(Phrasing, "phrasing"), default=Phrasing.TUNING.value,
              show_default=True, help="the templates facts are stated and asked in: tuning (settings were chosen on "
                                      "it, with dev), or heldout and check (each written apart, never tuned on)")
@click.option("--general", type=click.IntRange(min=0), default=None,
              help="general questions asked at the end of each conversation, which should page nothing in (default 6)")
@click.option("--questions", type=ChoiceOf(QuestionStyle, "question style"), default=QuestionStyle.EXPLICIT.value,
              show_default=True, help="how each fact is asked about: explicit (a question about it), implicit (a "
                                      "present need that depends on it, without asking about the past), or both "
                                      "(the implicit one right after the explicit one)")
@click.option("--absent", type=click.IntRange(min=0), default=0, show_default=True,
              help="questions per conversation about facts it never states (probes of type absent, no answer), "
                   "asked at the end")
@click.option("--kinds", type=click.Choice(KIND_SETS), default=TRAINED_KINDS, show_default=True,
              help="the fact kinds planted: trained (the kinds settings were chosen on, worded by --phrasing), "
                   "heldout (kinds_heldout.json: other kinds in words of their own, never tuned on), dev "
                   "(kinds_dev.json: yet other kinds in words of their own, which settings may be tuned on) or "
                   "train (kinds_train.json: more such kinds, which models are fitted on)")
def generate(out, count, seed, turns, revisiting, phrasing, general, questions, absent, kinds):
    """Write COUNT synthetic long conversations with planted facts and probes to OUT (JSONL)."""
    from ..lab.synthetic import GENERAL_PER_CONVERSATION, generate_dataset
    from ..store.loaders import dump_jsonl

    with friendly_errors():
        conversations = generate_dataset(count, seed=seed, n_turns=turns, revisiting=revisiting, phrasing=phrasing,
                                         general=GENERAL_PER_CONVERSATION if general is None else general,
                                         questions=questions, absent=absent, kinds=kinds)
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        dump_jsonl(conversations, out)
    probes = sum(len(c.probes) for c in conversations)
    click.echo(f"wrote {len(conversations)} conversations ({conversations[0].id} …), {probes} probes to {out}")


@lab.command()
@click.argument("dataset", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=ChoiceOf(FileFormat, "file format"), default=FileFormat.AUTO.value,
              show_default=True)
@click.option("--boundary", "boundaries", type=ListOf(boundary_name, [*Boundary, *PARAMETRIC_BOUNDARIES]),
              default=",".join(Boundary), show_default=True, help="boundary policies")
@click.option("--eviction", "evictions", type=list_of(Eviction, "eviction policy", also=(BELADY,)),
              default="fifo,lru,lfu,hybrid,belady", show_default=True,
              help="eviction policies; belady is the clairvoyant reference")
@click.option("--retriever", "retrievers", type=list_of(RetrieverName, "retriever"),
              default="rerank,bm25,overlap,oracle", show_default=True,
              help="retrievers scored on the probes that need a recall: would they find the evicted evidence?")
@click.option("--budget", type=click.IntRange(min=1), default=DEFAULT_BUDGET, show_default=True)
@click.option("--k", type=click.IntRange(min=1), default=3, show_default=True, help="pages a retriever may pick")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="only the first N conversations")
@click.option("--model", type=click.Path(), envvar="LOCALPAGER_MODEL", help="GGUF file whose tokenizer counts tokens")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="write the grid as JSON here")
def simulate(dataset, fmt, boundaries, evictions, retrievers, budget, k, limit, model, json_out):
    """Replay DATASET through boundary x eviction policies and report hit rates (no chat model)."""
    from tqdm import tqdm

    from ..backends.tokenizers import counter_for
    from ..lab.simulate import SimulationGrid
    from ..lab.sweep import simulation_report, write_simulation

    with friendly_errors():
        conversations = read_dataset(dataset, fmt)[:limit]
        grid = SimulationGrid(boundaries, evictions, budget, retrievers, k)
        result = grid.run(conversations, counter_for(model),
                          progress=lambda runs: tqdm(runs, desc="simulate", file=sys.stderr))
    click.echo(simulation_report(result))
    if json_out:
        click.echo(f"wrote {write_simulation(json_out, result)}")


def read_dataset(path: str, fmt: str):
    """The conversations of a conversation file, its warnings on stderr."""
    from ..store.loaders import load_conversations

    loaded = load_conversations(path, fmt)
    for warning in loaded.warnings:
        click.echo(f"warning: {warning}", err=True)
    return loaded.conversations


def conversation_slice(spec: str | None) -> slice:
    """``N`` (the first N) or ``A-B`` (A to B, 1-based, inclusive) as a slice of the conversation list."""
    if not spec:
        return slice(None)
    first, dash, last = spec.partition("-")
    try:
        if dash:
            a, b = int(first), int(last)
            if not 1 <= a <= b:
                raise ValueError
            return slice(a - 1, b)
        n = int(spec)
        if n < 1:
            raise ValueError
        return slice(n)
    except ValueError:
        raise click.BadParameter(f"expected N or A-B with 1 <= A <= B, got {spec!r}", param_hint="--conversations")


# -- eval: its options, then the experiments' ------------------------------------------------------------
def eval_options(f):
    """What a user sets to score memory on a conversation file: the data, the paging settings, the model."""
    for decorator in reversed([
        click.argument("dataset", type=click.Path(dir_okay=False)),
        click.option("--format", "fmt", type=ChoiceOf(FileFormat, "file format"), default=FileFormat.AUTO.value,
                     show_default=True),
        click.option("--boundary", type=BoundaryName(), default=DEFAULT_BOUNDARY.value, show_default=True,
                     help="where one page ends and the next begins"),
        click.option("--worth", is_flag=True,
                     help="the model judges each closed page; pages not worth keeping leave first"),
        click.option("--bookmark-format", type=ChoiceOf(BookmarkFormat, "bookmark format"),
                     default=DEFAULT_BOOKMARK_FORMAT.value, show_default=True),
        click.option("--budget", type=click.IntRange(min=1), default=DEFAULT_BUDGET, show_default=True),
        click.option("--limit", type=click.IntRange(min=1), default=None, help="at most N probes per conversation"),
        click.option("--conversations", "which_conversations", default=None,
                     help="N: the first N conversations; A-B: conversations A to B (1-based, inclusive)"),
        click.option("--model", type=click.Path(), envvar="LOCALPAGER_MODEL",
                     help="GGUF chat model (default: SmolLM2-135M-Instruct; env LOCALPAGER_MODEL)"),
        click.option("--json", "json_out", type=click.Path(dir_okay=False),
                     help="write JSON here, with a Markdown table and a PNG beside it"),
    ]):
        f = decorator(f)
    return f


def eval_experiment_options(f):
    """What only an experiment sets: runs compared (one per value of a list), baselines, the ceiling run,
    and variants of the settings the product's defaults were chosen among."""
    for decorator in reversed([
        experiment_option("--strategy", "strategies", type=list_of(EvalStrategy, "strategy"),
                          default=EvalStrategy.BOOKMARKS.value, show_default=True,
                          help="strategies (one run each)"),
        experiment_option("--eviction", "evictions", type=list_of(Eviction, "eviction policy"),
                          default=DEFAULT_EVICTION.value, show_default=True, help="eviction policies (one run each)"),
        experiment_option("--keywords", "keyword_strategies", type=list_of(KeywordStrategy, "keyword strategy"),
                          default=DEFAULT_KEYWORDS.value, show_default=True,
                          help="keyword strategies (one run each; llm-*, hybrid and auto ask the model)"),
        experiment_option("--layout", "layouts", type=list_of(Layout, "layout"), default=DEFAULT_LAYOUT.value,
                          show_default=True, help="answer layouts (one run each)"),
        experiment_option("--page-choice", type=ChoiceOf(PageChoice, "page choice"),
                          default=DEFAULT_PAGE_CHOICE.value, show_default=True,
                          help="who picks the pages the bookmarks strategy injects: the model, the ranking or both"),
        experiment_option("--signal", type=ChoiceOf(Signal, "signal"), default=DEFAULT_SIGNAL.value,
                          show_default=True, help="what of a page the reranking compares with the question"),
        experiment_option("--trigger", type=ChoiceOf(Trigger, "trigger"), default=DEFAULT_TRIGGER.value,
                          show_default=True,
                          help="gate: page in when the recall gate says memory is relevant; question: every question "
                               "while pages are evicted (the rule before the gate); off: only when the model asks"),
        experiment_option("--recall", "recall_mode", type=ChoiceOf(RecallMode, "recall mode", EVAL_RECALL_MODES),
                          default=RecallMode.AUTO.value, show_default=True,
                          help="always: the model must name pages on every probe (compares page choices on the "
                               "same recalls)"),
        experiment_option("--excerpt", default="0", show_default=True,
                          help="turns each side of a recalled page's best turn to inject, or 'page' for the whole page"),
        experiment_option("--pages", "max_pages", type=click.IntRange(1, 8), default=None,
                          help="pages one recall injects at most (default: the reranking selector's)"),
        experiment_option("--several-pages", type=click.IntRange(1, 8), default=None,
                          help="pages a recall injects at most when the question asks for several things (default: "
                               "the reranking selector's)"),
        experiment_option("--hide-bookmarks", is_flag=True,
                          help="no bookmark list in the prompt: pages come back by the trigger alone"),
        experiment_option("--no-oracle", is_flag=True, help="skip the evidence-injected ceiling run"),
        experiment_option("--categories", default=None,
                          help="LoCoMo question categories to ask, comma-separated (e.g. 1,2,3,4); default: all "
                               "with evidence"),
        experiment_option("--repeat-penalty", type=float, default=1.0, show_default=True,
                          help="llama.cpp repeat penalty for answers (the repetition guard runs regardless)"),
        experiment_option("--no-facts", is_flag=True,
                          help="without the long-term layer (standing facts): the product before it, for comparison"),
        experiment_option("--no-abstain", is_flag=True,
                          help="never answer \"not remembered\": a recall always answers from its best turn"),
        experiment_option("--forget", type=click.IntRange(min=0), default=0, show_default=True,
                          help="forget N planted facts at each conversation's end and ask about them again"),
        experiment_option("--split", type=click.IntRange(min=0), default=0, show_default=True,
                          help="tell each conversation over N chats of one user and ask its questions in a new "
                               "chat of theirs (0: as one conversation)"),
    ]):
        f = decorator(f)
    return f


@click.command(name="eval", cls=ExperimentCommand)
@eval_options
@eval_experiment_options
@click.pass_context
def evaluate_cmd(ctx, dataset, fmt, boundary, worth, bookmark_format, budget, limit, which_conversations, model,
                 json_out, **experiment):
    """Answer DATASET's probes with the local model and score them, for each strategy."""
    from tqdm import tqdm

    from ..core.pager import PagingConfig
    from ..lab.report import eval_markdown
    from ..lab.sweep import EvalSweep, run_eval_sweep

    with friendly_errors():
        conversations = read_dataset(dataset, fmt)[conversation_slice(which_conversations)]
        paging = PagingConfig(boundary=boundary, bookmark_format=bookmark_format, budget=budget, worth=worth)
        config = eval_config(limit, model, **experiment)
        sweep = EvalSweep(experiment["strategies"], experiment["evictions"], experiment["keyword_strategies"],
                          experiment["layouts"], paging, config, loading=global_options(ctx).model_options())
        bar = lambda name: lambda items: tqdm(items, desc=name, unit="probe", file=sys.stderr)
        runs, written = run_eval_sweep(conversations, sweep, progress=bar, json_out=json_out)
    click.echo(eval_markdown(runs))
    if json_out:
        for path in written:
            click.echo(f"wrote {path}")


def eval_config(limit, model, *, page_choice, recall_mode, no_oracle, excerpt, trigger, signal, hide_bookmarks,
                repeat_penalty, max_pages, several_pages, categories, no_facts, no_abstain, forget, split=0,
                **_runs):
    """The ``EvalConfig`` of eval's options (the lists of runs, ``_runs``, are the sweep's)."""
    from ..lab.evaluate import EvalConfig
    from ..retrieval.rerank import RerankSettings

    return EvalConfig(page_choice=page_choice, limit=limit, recall_mode=recall_mode, oracle=not no_oracle,
                      model=model, excerpt=None if excerpt == "page" else int(excerpt), trigger=trigger,
                      signal=signal, show_bookmarks=not hide_bookmarks, repeat_penalty=repeat_penalty,
                      max_pages=max_pages or RerankSettings.max_pages,
                      pages_when_several=several_pages or RerankSettings.pages_when_several,
                      categories=list(positive_ints(categories, "--categories")) if categories else None,
                      facts=not no_facts, abstain=not no_abstain, forget=forget, split=split)


# -- bench ---------------------------------------------------------------------------------------------------
@click.command(cls=ExperimentCommand)
@click.option("--quick", is_flag=True, help="two lengths, fewer turns: a few minutes")
@click.option("--turns", "probe_turns", type=click.IntRange(min=1), default=None, help="probe turns per length (default 20, quick 6)")
@click.option("--model", type=click.Path(), envvar="LOCALPAGER_MODEL",
              help="GGUF chat model (default: SmolLM2-135M-Instruct; env LOCALPAGER_MODEL)")
@click.option("--warm", is_flag=True,
              help="each conversation warms up before its first question, as `chat` does while you type (the "
                   "first answer then finds the models and indexes loaded)")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="write JSON here, and a PNG plot beside it")
@experiment_option("--cold-turns", type=click.IntRange(min=20), default=3200, show_default=True,
                   help="turns of the stored conversation a new process answers on")
@experiment_option("--eviction-turns", type=click.IntRange(min=20), default=None,
                   help="turns replayed to count tokens on eviction turns (default 400, quick 200; more at larger "
                        "budgets)")
@experiment_option("--eviction-budgets", default="512,2048", show_default=True,
                   help="comma-separated budgets at which tokens on eviction turns are counted")
@click.pass_context
def bench(ctx, quick, probe_turns, model, warm, json_out, cold_turns, eviction_turns, eviction_budgets):
    """Recall latency per stage and its ratio to the hardware floor, by conversation length."""
    from tqdm import tqdm

    from ..lab.bench import BenchConfig, plot, run_bench

    config = BenchConfig(quick=quick, probe_turns=probe_turns or (6 if quick else 20), model=model, warm=warm,
                         cold_turns=cold_turns, eviction_turns=eviction_turns,
                         eviction_budgets=positive_ints(eviction_budgets, "--eviction-budgets"),
                         loading=global_options(ctx).model_options())
    with friendly_errors():
        result = run_bench(config, progress=lambda jobs: tqdm(jobs, desc="bench", file=sys.stderr),
                           log=lambda s: click.echo(s, err=True))
    for line in bench_lines(result, config.cold_turns):
        click.echo(line)
    if json_out:
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(json.dumps(result, indent=2))
        with friendly_errors():
            png = plot(result, Path(json_out).with_suffix(".png"))
        click.echo(f"wrote {json_out} and {png}")


def bench_lines(result: dict, cold_turns: int) -> list[str]:
    """The bench's summary, a figure a line."""
    from ..lab.bench import report_line

    busy = result["busy"]
    return [
        f"ratio to floor (median turn): {result['ratio_to_floor']}   flatness: {result['flatness']} "
        f"(full context: {result['flatness_full']})",
        "p50 ms by length: " + json.dumps(result["p50_ms"]),
        report_line(result),
        "rerank ms by index size: " + json.dumps({n: r['total_ms'] for n, r in result['rerank_ms'].items()}),
        f"p95 ms {result['p95_ms_with_first']} with each run's first answer, {result['p95_ms_after_first']} "
        f"after it; warm answer p50 {result['warm_answer_ms']} ms; each run's first answer "
        f"{result['first_answer_ms']} ms ({result['first_vs_p50']} of the p50)",
        f"new process to its first answer ({cold_turns} stored turns): {result['cold_first_answer_ms']} ms; "
        f"small talk {result['cold_small_talk_ms']['unsaved']} ms, with the saved KV cache "
        f"{result['cold_small_talk_ms']['resumed']} ms",
        "tokens evaluated on eviction turns (p50, spliced / full re-read): " + ", ".join(
            f"budget {b}: {e['eviction_tokens_evaluated']} / {e['eviction_tokens_full']}"
            for b, e in result["evictions"].items()),
        f"peak RSS {result['peak_rss_mb']} MB, --help {result['help_ms']} ms",
        f"beside a busy process: p50 {busy['p50_busy_ms']} ms against {busy['p50_idle_ms']} ms idle "
        f"(busy_ratio {result['busy_ratio']}; threads {busy['threads_busy']} against {busy['threads_idle']})",
    ]


COMMANDS = (lab, evaluate_cmd, bench)
