"""The ``localpager`` command: a thin shell over the library API (``localpager.memory.api``).

At start-up only click and modules of the standard library are imported (the option choices come from each
layer's ``choices`` module), so ``localpager --help`` stays fast; numpy, FAISS and the model runtimes are
imported inside the command that needs them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path

import click

from .backends.choices import ConstraintFormat
from .core.choices import (
    DEFAULT_BOOKMARK_FORMAT,
    DEFAULT_BOUNDARY,
    DEFAULT_EVICTION,
    DEFAULT_KEYWORDS,
    PARAMETRIC_BOUNDARIES,
    BookmarkFormat,
    Boundary,
    Eviction,
    KeywordStrategy,
    choose,
    unknown,
)
from .core.pager import DEFAULT_BUDGET
from .lab.choices import BELADY, EvalStrategy, Phrasing, RetrieverName
from .memory.choices import ImportMode
from .retrieval.choices import DEFAULT_PAGE_CHOICE, DEFAULT_SIGNAL, PageChoice, Signal
from .runtime.choices import DEFAULT_LAYOUT, DEFAULT_TRIGGER, OFFERED_RECALL_MODES, Layout, RecallMode, Trigger
from .runtime.trace import citation_lines
from .store.choices import FileFormat

LAYOUT_HELP = ("how a recall is answered: focused (the recalled turns and the question in a prompt of their own), "
               "focused+recent (plus the last exchange), notes-system, inline (after the question in the chat's prompt)")
EVAL_RECALL_MODES = (RecallMode.AUTO, RecallMode.ALWAYS)  # never: the eval's truncation strategy
# optional dependencies by top-level module, and the extra (pyproject.toml) that installs each
OPTIONAL_MODULES = {"matplotlib": "eval", "fastapi": "server", "uvicorn": "server", "sse_starlette": "server",
                    "starlette": "server", "httpx": "http", "sqlcipher3": "encrypt", "psycopg": "postgres",
                    "psycopg_pool": "postgres"}


# -- choices: every option's names come from the enum that the library checks them against ---------------
class ChoiceOf(click.Choice):
    """A ``click.Choice`` of a ``StrEnum``'s members (``offered``: some of them). The value comes back as the
    member; an unknown name gets the library's one message (``core.choices.unknown``)."""

    def __init__(self, kind: type[StrEnum], what: str, offered: Iterable[StrEnum] | None = None):
        self.kind, self.what = kind, what
        super().__init__([m.value for m in (kind if offered is None else offered)])

    def convert(self, value, param, ctx):
        if value in self.choices:
            return self.kind(value)
        self.fail(str(unknown(self.what, value, self.choices)), param, ctx)


class ListOf(click.ParamType):
    """Comma-separated names (one run each), every one checked by ``parse`` (the library's own check, so an
    unknown name gets its one message) before anything runs; ``names`` are what help shows."""

    name = "list"

    def __init__(self, parse: Callable[[str], object], names: Iterable[str]):
        self.parse, self.names = parse, [str(n) for n in names]

    def get_metavar(self, param, ctx=None) -> str:
        return f"[{'|'.join(self.names)}],..."

    def convert(self, value, param, ctx):
        if isinstance(value, (list, tuple)):
            return value
        try:
            names = [self.parse(v) for v in split_list(value)]
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if not names:
            self.fail(f"expected one or more of {', '.join(self.names)}, comma-separated", param, ctx)
        return names


def list_of(kind: type[StrEnum], what: str, also: tuple[str, ...] = ()) -> ListOf:
    """A ``ListOf`` the members of ``kind``, and the names ``also`` that the command itself takes."""
    return ListOf(lambda name: name if name in also else choose(kind, name, what, also=also), [*kind, *also])


def boundary_name(name: str) -> str:
    """A boundary policy's name, checked: a ``Boundary``, or ``fixed_N`` / ``exchange_N``."""
    from .core.boundaries import get_boundary

    get_boundary(name)
    return name


class BoundaryName(click.ParamType):
    """One boundary policy: a ``Boundary``, or ``fixed_N`` / ``exchange_N`` for any N."""

    name = "boundary"

    def get_metavar(self, param, ctx=None) -> str:
        return f"[{'|'.join([*Boundary, *PARAMETRIC_BOUNDARIES])}]"

    def convert(self, value, param, ctx):
        try:
            return boundary_name(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


@contextmanager
def friendly_errors():
    """Known failures become one-line errors; anything else stays a traceback (a bug to report)."""
    from .backends.base import BackendError
    from .backends.modelpaths import ModelNotFoundError
    from .store.loaders import ConversationFileError
    from .store.base import StoreError

    try:
        yield
    except ModuleNotFoundError as exc:  # an optional dependency: say which extra brings it
        extra = OPTIONAL_MODULES.get((exc.name or "").split(".")[0])
        if extra is None:
            raise
        raise click.ClickException(f"this needs {exc.name}, which is not installed: "
                                   f"pip install 'localpager[{extra}]'") from None
    except (BackendError, ConversationFileError, ModelNotFoundError, StoreError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None


def positive_ints(text: str, option: str) -> tuple[int, ...]:
    """``512,2048`` as (512, 2048); anything else is a one-line usage error."""
    try:
        values = tuple(int(v) for v in split_list(text))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise click.BadParameter(f"expected comma-separated positive numbers, got {text!r}", param_hint=option)
    return values


def open_pager(ctx: click.Context, model: str | None = None, *, create: bool = True, **options):
    """The LocalPager of ``--store``. Without ``create`` the store must exist: commands that only read it,
    or need a conversation already in it, never leave an empty store behind."""
    from .memory.api import LocalPager
    from .store.location import open_store
    from .store.base import StoreError

    try:  # a SQLite file, or postgresql://USER@HOST:PORT/DB (store.location)
        store = open_store(ctx.obj["store"], key=store_key(ctx), create=create)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    lp = LocalPager(store, model=model, **{**backend_options(ctx), **options})
    ctx.call_on_close(lp.close)  # saves the chat's KV cache for the next command (localpager.store.kvstate)
    return lp


BACKEND_ENV = {"backend": "LOCALPAGER_BACKEND", "base_url": "LOCALPAGER_BASE_URL", "api_key": "LOCALPAGER_API_KEY",
               "tokenizer": "LOCALPAGER_TOKENIZER", "constraint": "LOCALPAGER_CONSTRAINT",
               "allow_estimate": "LOCALPAGER_ALLOW_ESTIMATE"}


def backend_options(ctx: click.Context) -> dict:
    """LocalPager's ``backend`` and ``backend_options`` from the global options (none: the default backend)."""
    chosen = ctx.obj.get("backend") or {}
    if not chosen.get("backend"):
        return {}
    options = {k: v for k, v in chosen.items() if k != "backend" and v not in (None, False)}
    return {"backend": chosen["backend"], "backend_options": options if chosen["backend"] == "openai-http" else {}}


def export_backend(ctx: click.Context) -> None:
    """Put the global backend options in this process's environment, where the commands that build their
    own backends (eval, bench and the processes bench starts) find them."""
    import os

    for key, value in (ctx.obj.get("backend") or {}).items():
        if value not in (None, False):
            os.environ[BACKEND_ENV[key]] = "1" if value is True else str(value)


def store_key(ctx: click.Context) -> str | None:
    """The encryption key named by ``--key-env`` (read from that environment variable), or None."""
    name = ctx.obj.get("key_env")
    if not name:
        return None
    import os

    key = os.environ.get(name)
    if not key:
        raise click.ClickException(f"--key-env {name}: the environment variable {name} is not set or empty")
    return key


class Bars:
    """Progress bars on stderr, one per stage (``bars("embed", done, total)``), each shown only once its
    stage has run for a second (tqdm's ``delay``) and never when ``disabled`` (``--json`` output)."""

    def __init__(self, disabled: bool = False, unit: str = "turn"):
        self.disabled, self.unit = disabled, unit
        self._bars: dict = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.disabled:
            return
        from tqdm import tqdm

        bar = self._bars.get(stage)
        if bar is None:
            for earlier in self._bars.values():  # one stage after another: the one before is done
                earlier.close()
            unit = "line" if stage == "read" else self.unit
            bar = self._bars[stage] = tqdm(total=total, desc=stage, unit=unit, delay=1.0, file=sys.stderr,
                                           mininterval=0.5)
        bar.total = max(total, done)
        bar.update(done - bar.n)

    def stage(self, name: str):
        """The ``progress(done, total)`` of one stage (``Conversation.prepare``, ``ingest``'s ``on_turns``)."""
        return lambda done, total: self(name, done, total)

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()


def prepare_recall(conv, bars: Bars) -> None:
    """Embed the evicted turns a recall would search now, with a bar when that takes more than a second
    (a store never searched, or just imported); nothing when they are embedded already. A missing embedder
    is left for the recall itself to report."""
    from .backends.modelpaths import ModelNotFoundError

    if not conv.pager.evicted:
        return
    try:
        conv.prepare(progress=bars.stage("embed"))
    except ModelNotFoundError:
        pass
    finally:
        bars.close()


def echo_json(data) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _store_setting(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """A store option given after the command sets what it sets before it (after wins)."""
    if value is not None:
        ctx.ensure_object(dict)[param.name] = value


class StoreGroup(click.Group):
    """The command group. Every command that opens the store also takes ``--store`` and ``--key-env`` after
    its name (``localpager bookmarks X --store m.db``), where people put them: before, only
    ``localpager --store m.db bookmarks X`` worked and the other order was "No such option"."""

    WITHOUT_STORE = ("generate", "simulate", "eval", "bench", "migrate-store")

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        if (name or cmd.name) not in self.WITHOUT_STORE:
            cmd.params += [
                click.Option(["--store"], type=click.Path(dir_okay=False), expose_value=False, callback=_store_setting,
                             help="SQLite file or postgresql:// URL (as before the command: localpager --store PATH ...)"),
                click.Option(["--key-env"], metavar="NAME", expose_value=False, callback=_store_setting,
                             help="the store's key is in environment variable NAME (as before the command)")]
        super().add_command(cmd, name)


@click.group(cls=StoreGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="localpager")
@click.option("--store", envvar="LOCALPAGER_STORE", type=click.Path(dir_okay=False),
              help="SQLite store file, or postgresql://USER@HOST:PORT/DB (needs pip install 'localpager[postgres]'; "
                   "docs/deployment.md); default: localpager.db in your data directory; env LOCALPAGER_STORE")
@click.option("--key-env", metavar="NAME", default=None,
              help="the store is encrypted (SQLCipher) with the key in environment variable NAME; "
                   "needs pip install 'localpager[encrypt]'")
@click.option("--backend", envvar="LOCALPAGER_BACKEND", default=None,
              help="llama-cpp (default: the GGUF file in this process) or openai-http (a model you serve); "
                   "env LOCALPAGER_BACKEND")
@click.option("--base-url", envvar="LOCALPAGER_BASE_URL", default=None,
              help="openai-http: the server's OpenAI-compatible URL (default http://127.0.0.1:8080/v1); "
                   "--model then names the served model (default: its first)")
@click.option("--api-key", envvar="LOCALPAGER_API_KEY", default=None, help="openai-http: bearer token, if the server wants one")
@click.option("--tokenizer", envvar="LOCALPAGER_TOKENIZER", type=click.Path(dir_okay=False), default=None,
              help="openai-http: the served model's GGUF file, for its tokenizer and chat template "
                   "(needed for Ollama and LM Studio)")
@click.option("--constraint", envvar="LOCALPAGER_CONSTRAINT", type=ChoiceOf(ConstraintFormat, "constraint"),
              default=None, help="openai-http: how recall decisions are constrained (default auto: probe the server)")
@click.option("--allow-estimate", envvar="LOCALPAGER_ALLOW_ESTIMATE", is_flag=True, default=False,
              help="openai-http: estimate token counts when the server has no tokenizer (flagged in the trace)")
@click.option("--threads", type=click.IntRange(min=1), envvar="LOCALPAGER_THREADS", default=None,
              help="llama.cpp threads (default: the cores other work leaves free when the model loads, by the "
                   "CPU time the kernel counts; llama.cpp's threads spin, so taking a busy core costs far more than it "
                   "gives); env LOCALPAGER_THREADS")
@click.pass_context
def cli(ctx: click.Context, store: str | None, key_env: str | None, backend: str | None, base_url: str | None,
        api_key: str | None, tokenizer: str | None, constraint: str | None, allow_estimate: bool,
        threads: int | None) -> None:
    """Long-conversation memory for local LLMs: pages old turns out, recalls them by bookmark."""
    if threads:
        os.environ["LOCALPAGER_THREADS"] = str(threads)  # read where the model loads, in this process and its workers
    ctx.obj = {"store": store, "key_env": key_env,
               "backend": {"backend": backend, "base_url": base_url, "api_key": api_key, "tokenizer": tokenizer,
                           "constraint": constraint, "allow_estimate": allow_estimate}}


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=ChoiceOf(FileFormat, "file format"), default=FileFormat.AUTO.value,
              show_default=True)
@click.option("--boundary", type=BoundaryName(), default=DEFAULT_BOUNDARY.value, show_default=True,
              help="where one page ends and the next begins")
@click.option("--eviction", type=ChoiceOf(Eviction, "eviction policy"), default=DEFAULT_EVICTION.value,
              show_default=True, help="which resident page leaves the prompt first")
@click.option("--keywords", type=ChoiceOf(KeywordStrategy, "keyword strategy"), default=DEFAULT_KEYWORDS.value,
              show_default=True, help="how bookmark keywords are chosen (llm-*, hybrid and auto ask the model)")
@click.option("--worth", is_flag=True, help="the model judges each closed page; pages not worth keeping leave first")
@click.option("--bookmark-format", type=ChoiceOf(BookmarkFormat, "bookmark format"),
              default=DEFAULT_BOOKMARK_FORMAT.value, show_default=True)
@click.option("--budget", type=click.IntRange(min=1), default=DEFAULT_BUDGET, show_default=True,
              help="memory budget in model tokens")
@click.option("--model", type=click.Path(), envvar="LOCALPAGER_MODEL", help="GGUF file: its tokenizer counts tokens "
              "(and, for model keyword strategies, it chooses keywords)")
@click.option("--replace", is_flag=True, help="overwrite conversations already in the store")
@click.option("--embed", is_flag=True, help="embed the evicted turns now (else the first recall of each "
              "conversation does: minutes for 100,000 turns)")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def ingest(ctx, file, fmt, boundary, eviction, keywords, worth, bookmark_format, budget, model, replace, embed,
           as_json):
    """Store the conversations of FILE (interchange JSONL or LoCoMo JSON), paged."""
    from .core.pager import PagingConfig

    with friendly_errors():
        config = PagingConfig(boundary=boundary, eviction=eviction, keywords=keywords,
                              bookmark_format=bookmark_format, budget=budget, worth=worth)
        lp = open_pager(ctx, model)
        bars = Bars(disabled=as_json)
        try:
            report = lp.ingest(file, fmt, config, replace=replace, on_turns=bars.stage("ingest"))
            for conv_id in report.ids if embed else ():
                lp.conversation(conv_id).prepare(progress=bars.stage("embed"))
        finally:
            bars.close()
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        echo_json(report.__dict__)
    else:
        click.echo(f"stored {report.conversations} conversations, {report.turns} turns, {report.pages} pages "
                   f"({report.evicted} evicted), {report.probes} probes in {lp.store.path}")


@cli.command()
@click.argument("out", type=click.Path(dir_okay=False, writable=True))
@click.option("--n", "count", type=click.IntRange(min=1), default=10, show_default=True, help="conversations to generate")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--turns", type=int, default=160, show_default=True, help="turns per conversation")
@click.option("--revisiting/--forward", default=None,
              help="probes asked during the conversation / at the end (default: alternate)")
@click.option("--phrasing", type=ChoiceOf(Phrasing, "phrasing"), default=Phrasing.TUNING.value,
              show_default=True, help="the templates facts are stated and asked in: tuning (settings were chosen on "
                                      "it, with dev), or heldout (written apart, never tuned on)")
@click.option("--general", type=click.IntRange(min=0), default=None,
              help="general questions asked at the end of each conversation, which should page nothing in (default 6)")
def generate(out, count, seed, turns, revisiting, phrasing, general):
    """Write COUNT synthetic long conversations with planted facts and probes to OUT (JSONL)."""
    from .lab.synthetic import GENERAL_PER_CONVERSATION, generate_dataset
    from .store.loaders import dump_jsonl

    with friendly_errors():
        conversations = generate_dataset(count, seed=seed, n_turns=turns, revisiting=revisiting, phrasing=phrasing,
                                         general=GENERAL_PER_CONVERSATION if general is None else general)
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        dump_jsonl(conversations, out)
    probes = sum(len(c.probes) for c in conversations)
    click.echo(f"wrote {len(conversations)} conversations ({conversations[0].id} …), {probes} probes to {out}")


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def conversations(ctx, as_json):
    """List the stored conversations."""
    with friendly_errors():
        infos = open_pager(ctx, create=False).conversations()
    if as_json:
        echo_json([i.__dict__ for i in infos])
        return
    for i in infos:
        click.echo(f"{i.id}\t{i.turns} turns\t{i.pages} pages ({i.evicted} evicted)\t{i.probes} probes")


def page_line(p) -> str:
    state = "evicted" if p.evicted else "resident"
    return (f"p{p.page_id}\tturns {p.first_turn}-{p.last_turn}\t{p.token_count} tokens\t{state}"
            f"{' pinned' if p.pinned else ''}\tused {p.access_count}x\t{','.join(p.keywords)}")


def _conversation(ctx, conv_id: str):
    """An existing conversation of an existing store; no model loads until a command needs one."""
    return open_pager(ctx, create=False).conversation(conv_id)


@cli.command()
@click.argument("conv_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def pages(ctx, conv_id, as_json):
    """The pages of a conversation."""
    with friendly_errors():
        conv = _conversation(ctx, conv_id)
    if as_json:
        echo_json([{k: v for k, v in p.__dict__.items() if k != "text"} for p in conv.pages])
        return
    for p in conv.pages:
        click.echo(page_line(p))


@cli.command()
@click.argument("conv_id")
@click.argument("page_id", type=int)
@click.option("--unpin", is_flag=True)
@click.pass_context
def pin(ctx, conv_id, page_id, unpin):
    """Pin page PAGE_ID of CONV_ID so that it is never evicted (or --unpin it)."""
    with friendly_errors():
        try:
            page = _conversation(ctx, conv_id).pin(page_id, not unpin)
        except KeyError as exc:
            raise click.ClickException(exc.args[0]) from None
    state = "pinned" if page.pinned else "unpinned"
    click.echo(f"p{page.page_id} {state}{' (it is evicted; it stays evicted)' if page.evicted and page.pinned else ''}")


@cli.command()
@click.argument("conv_id")
@click.option("--format", "fmt", type=ChoiceOf(BookmarkFormat, "bookmark format"), default=None,
              help="bookmark format (default: the conversation's)")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def bookmarks(ctx, conv_id, fmt, as_json):
    """One bookmark a line for every page of a conversation."""
    with friendly_errors():
        conv = _conversation(ctx, conv_id)
        lines = conv.bookmarks(fmt)
    if as_json:
        echo_json([{"page_id": p.page_id, "evicted": p.evicted, "bookmark": b} for p, b in zip(conv.pages, lines)])
        return
    for line in lines:
        click.echo(line)


def model_options(f):
    f = click.option("--model", type=click.Path(), envvar="LOCALPAGER_MODEL",
                     help="GGUF chat model (default: SmolLM2-135M-Instruct; env LOCALPAGER_MODEL)")(f)
    f = click.option("--budget", type=click.IntRange(min=1), default=None,
                     help="memory budget in model tokens, for this command only unless --save")(f)
    f = click.option("--save", is_flag=True, help="store --budget with the conversation")(f)
    f = click.option("--recall", "recall_mode", type=ChoiceOf(RecallMode, "recall mode", OFFERED_RECALL_MODES),
                     default=RecallMode.AUTO.value, show_default=True,
                     help="auto: the recall gate pages in when a message asks about what was said, else the "
                          "model may ask; always: it must recall; never: no recall")(f)
    f = click.option("--n-ctx", type=click.IntRange(min=128), default=2048, show_default=True, help="model context size")(f)
    f = click.option("--layout", type=ChoiceOf(Layout, "layout"), default=DEFAULT_LAYOUT.value, show_default=True,
                     help=LAYOUT_HELP)(f)
    return f


def _chat_conversation(ctx, conv_id, model, budget, save, recall_mode, n_ctx, layout, create=False):
    from .runtime.recall import RecallSettings

    if save and budget is None:
        raise click.UsageError("--save stores --budget: give --budget N")
    lp = open_pager(ctx, model, create=create, n_ctx=n_ctx, recall=RecallSettings(mode=recall_mode, layout=layout))
    return lp.conversation(conv_id, create=create)


@cli.command()
@click.argument("conv_id")
@click.argument("question", required=False)
@click.option("--probe", type=int, default=None, help="ask the conversation's stored probe number N instead")
@model_options
@click.option("--json", "as_json", is_flag=True, help="print the answer with its trace as JSON")
@click.pass_context
def ask(ctx, conv_id, question, probe, model, budget, save, recall_mode, n_ctx, layout, as_json):
    """Ask QUESTION in conversation CONV_ID; the question and answer are stored as turns.

    --budget N pages the conversation under N tokens for this question only; with --save it becomes the
    conversation's budget (stored once the answer is)."""
    if (question is None) == (probe is None):
        raise click.UsageError("give a QUESTION or --probe N")
    with friendly_errors():
        conv = _chat_conversation(ctx, conv_id, model, budget, save, recall_mode, n_ctx, layout)
        if probe is not None:
            probes = conv.store.probes(conv_id)
            if not 0 <= probe < len(probes):
                raise click.ClickException(f"conversation {conv_id!r} has {len(probes)} probes; no probe {probe}")
            question = probes[probe].question
        if recall_mode != RecallMode.NEVER and not conv.store.read_only:  # read-only: ask says so, loading nothing
            conv.held.models.preload()  # the chat model loads while the memory a recall needs is read
            prepare_recall(conv, Bars(disabled=as_json))
        result = conv.ask(question, budget=budget)
        if save:
            conv.set_budget(budget)
    if as_json:
        echo_json(result.to_dict())
    else:
        click.echo(result.answer)
        for line in citation_lines(result.to_dict()["citations"]):
            click.echo(f"  {line}", err=True)


@cli.command()
@click.argument("conv_id", required=False, default="chat")
@model_options
@click.pass_context
def chat(ctx, conv_id, model, budget, save, recall_mode, n_ctx, layout):
    """Chat in conversation CONV_ID (created if new); /help lists /search, /forget, /pin, /export and more.

    --budget N pages the conversation under N tokens for this session only; with --save it becomes the
    conversation's budget."""
    from .runtime.trace import format_trace

    with friendly_errors():
        conv = _chat_conversation(ctx, conv_id, model, budget, save, recall_mode, n_ctx, layout, create=True)
        if budget is not None and (save or budget != conv.budget):
            conv.set_budget(budget, save=save)
    click.echo(f"conversation {conv_id}: {len(conv.turns)} turns, {len(conv.pages)} pages. /help for commands.")
    if recall_mode != RecallMode.NEVER:  # the models, vectors and indexes load while the user types
        conv.warm_up(models=True)
    last = None
    while True:
        try:
            line = click.prompt("you", prompt_suffix="> ", default="", show_default=False)
        except (EOFError, click.Abort):
            click.echo()
            return
        line = line.strip()
        if not line:
            continue
        if line in ("/quit", "/exit"):
            return
        if line == "/help":
            click.echo(CHAT_HELP)
        elif line.split()[0] in MEMORY_COMMANDS:
            try:
                with friendly_errors():
                    chat_memory_command(conv, line)
            except click.ClickException as exc:
                click.echo(f"error: {exc.message}", err=True)
        elif line.startswith("/") and line not in ("/bookmarks", "/pages", "/trace"):
            click.echo(f"unknown command {line.split()[0]}; commands: {' '.join(CHAT_COMMANDS)} (/help)")
        elif line == "/bookmarks":
            for p in conv.pager.evicted:
                click.echo(conv.pager.bookmark(p))
            if not conv.pager.evicted:
                click.echo("(no page evicted yet)")
        elif line == "/pages":
            for p in conv.pages:
                click.echo(page_line(p))
        elif line == "/trace":
            click.echo(format_trace(last.to_dict()) if last else "no turn yet")
        else:
            click.echo("bot> ", nl=False)
            try:
                with friendly_errors():
                    last = conv.ask(line, on_text=lambda piece: click.echo(piece, nl=False))
            except click.ClickException as exc:  # say what went wrong and keep chatting
                click.echo(f"\nerror: {exc.message}", err=True)
                continue
            click.echo()
            for cited in citation_lines(last.to_dict()["citations"]):
                click.echo(f"  ({cited})")


CHAT_COMMANDS = ("/bookmarks", "/pages", "/trace", "/search", "/forget", "/pin", "/unpin", "/export", "/quit")
MEMORY_COMMANDS = ("/search", "/forget", "/pin", "/unpin", "/export")
CHAT_HELP = """/bookmarks          evicted pages as the model sees them
/pages              every page
/trace              what the pager did on the last turn
/search WORDS       what is remembered about WORDS
/forget turn N | page N | TEXT   forget a turn, a page, or every turn containing TEXT (asks first)
/pin N, /unpin N    keep page N in the prompt (or not)
/export FILE        write this conversation to a JSONL file
/quit"""


def chat_memory_command(conv, line: str) -> None:
    """/search, /forget, /pin, /unpin and /export in a chat: what the commands of the same name do."""
    command, _, rest = line.partition(" ")
    rest = rest.strip()
    if command == "/search":
        if not rest:
            raise click.ClickException("/search WORDS")
        hits = conv.search(rest, limit=5)
        for h in hits:
            click.echo(h.line())
        if not hits:
            click.echo("(nothing remembered)")
    elif command == "/forget":
        kind, _, value = rest.partition(" ")
        if kind in ("turn", "page") and value.strip().isdigit():
            target = {kind: int(value)}
        elif rest:
            target = {"match": rest}
        else:
            raise click.ClickException("/forget turn N | page N | TEXT")
        preview = conv.forget(**target, dry_run=True)
        if not preview.turns:
            click.echo("nothing to forget")
            return
        for text in preview.lines():
            click.echo(text)
        if click.confirm("forget these for good?", default=False):
            for text in conv.forget(**target).summary():
                click.echo(text)
    elif command in ("/pin", "/unpin"):
        if not rest.lstrip("p").isdigit():
            raise click.ClickException(f"{command} N (a page number)")
        try:
            page = conv.pin(int(rest.lstrip("p")), command == "/pin")
        except KeyError as exc:
            raise click.ClickException(exc.args[0]) from None
        click.echo(f"p{page.page_id} {'pinned' if page.pinned else 'unpinned'}")
    elif command == "/export":
        if not rest:
            raise click.ClickException("/export FILE")
        conv.export(rest)
        click.echo(f"exported {conv.id} to {rest}")


@cli.command()
@click.argument("conv_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def log(ctx, conv_id, as_json):
    """The stored traces of CONV_ID's answered turns."""
    from .runtime.trace import format_trace

    with friendly_errors():
        traces = _conversation(ctx, conv_id).traces()
    if as_json:
        echo_json(traces)
        return
    for t in traces:
        if t.get("status") in ("unanswered", "interrupted"):  # a question whose answer never came (or not yet)
            reason = f": {t['reason']}" if t.get("reason") else " (being answered, or its process died)"
            click.echo(f"turn {t['turn']}: {t.get('question', '')[:70]!r}\n  no answer, {t['status']}{reason}")
        else:
            click.echo(format_trace(t))


@cli.command()
@click.argument("conv_id")
@click.argument("tokens", type=click.IntRange(min=1), required=False)
@click.option("--model", type=click.Path(), envvar="LOCALPAGER_MODEL", help="GGUF file whose tokenizer counts tokens")
@click.pass_context
def budget(ctx, conv_id, tokens, model):
    """Show CONV_ID's stored memory budget, or store TOKENS as its budget (evicting at once if over it)."""
    with friendly_errors():
        lp = open_pager(ctx, model, create=False)
        conv = lp.conversation(conv_id)
        if tokens is None:
            click.echo(conv.budget)
            return
        conv.set_budget(tokens)
    click.echo(f"{conv_id}: budget {tokens} tokens")


def split_list(text: str) -> list[str]:
    """A comma-separated option as its non-empty items."""
    return [s.strip() for s in text.split(",") if s.strip()]


# -- memory the user controls: forget, search, correct, export, import ---------------------------------
@cli.command()
@click.argument("conv_id")
@click.option("--turn", type=int, default=None, help="forget turn N (as `log` and citations number them)")
@click.option("--page", type=int, default=None, help="forget every turn of page N")
@click.option("--match", default=None, help="forget every turn containing TEXT (case-insensitive)")
@click.option("--dry-run", is_flag=True, help="list what would be forgotten; change nothing")
@click.option("--yes", is_flag=True, help="no confirmation when forgetting a whole conversation")
@click.option("--finish", is_flag=True, help="finish rewriting the store's files after a forget that could not")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def forget(ctx, conv_id, turn, page, match, dry_run, yes, finish, as_json):
    """Forget turns of CONV_ID (or, with no --turn/--page/--match, the whole conversation): their text,
    vectors, bookmark words and the traces repeating them, erased from the store's files. Exits 1 if the
    files could not be rewritten (another process was reading the store): run it again, or --finish."""
    if sum(x is not None for x in (turn, page, match)) > 1:
        raise click.UsageError("give one of --turn, --page or --match")
    if finish and (dry_run or any(x is not None for x in (turn, page, match))):
        raise click.UsageError("--finish takes no --turn, --page, --match or --dry-run")
    with friendly_errors():
        lp = open_pager(ctx, create=False)
        if finish:
            from .memory.controls import ForgetReport

            done = lp.finish_erase()
            report = ForgetReport(conv_id, rewritten=done, erased=done, rewrite_pending=not done)
        elif turn is None and page is None and match is None:
            if not dry_run and not yes:
                preview = lp.forget_conversation(conv_id, dry_run=True)
                click.confirm(f"forget conversation {conv_id} ({len(preview.turns)} turns) for good?", abort=True,
                              err=True)
            report = lp.forget_conversation(conv_id, dry_run=dry_run)
        else:
            report = lp.conversation(conv_id).forget(turn=turn, page=page, match=match, dry_run=dry_run)
    if as_json:
        echo_json(report.to_dict())
    elif finish:
        click.echo("rewrote the store's files: nothing forgotten is left in them" if report.rewritten else
                   "could not rewrite the store's files: another process is reading the store; run this again "
                   "once it has closed")
    else:
        for line in report.lines():
            click.echo(line)
    if report.rewrite_pending:  # the text is still on disk: not a success
        ctx.exit(1)


@cli.command()
@click.argument("conv_id")
@click.argument("query")
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def search(ctx, conv_id, query, limit, as_json):
    """What CONV_ID remembers about QUERY: turns ranked as a recall ranks them (loads the embedder only)."""
    with friendly_errors():
        conv = _conversation(ctx, conv_id)
        prepare_recall(conv, Bars(disabled=as_json))
        hits = conv.search(query, limit)
    if as_json:
        echo_json([h.to_dict() for h in hits])
        return
    for h in hits:
        click.echo(h.line())
    if not hits:
        click.echo("(nothing remembered)")


@cli.command()
@click.argument("conv_id")
@click.option("--turn", type=int, required=True, help="the turn the new statement corrects")
@click.argument("text")
@click.option("--model", type=click.Path(), envvar="LOCALPAGER_MODEL", help="GGUF file whose tokenizer counts tokens")
@click.pass_context
def correct(ctx, conv_id, turn, text, model):
    """Record TEXT as the corrected statement of --turn N: recall then shows TEXT, and the old turn is
    labelled changed."""
    with friendly_errors():
        new = open_pager(ctx, model, create=False).conversation(conv_id).correct(turn, text)
    click.echo(f"turn {turn} corrected by turn {new.index}")


@cli.command(name="export")
@click.argument("conv_id", required=False)
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="JSONL file to write")
@click.option("--vectors", is_flag=True, help="include the embeddings (import then needs no embedder)")
@click.pass_context
def export_cmd(ctx, conv_id, output, vectors):
    """Write CONV_ID (default: every conversation) to a JSONL file: turns, times, speakers, pages, pins,
    corrections, settings."""
    with friendly_errors():
        n = open_pager(ctx, create=False).export(output, [conv_id] if conv_id else None, vectors=vectors)
    click.echo(f"exported {n} conversations to {output}")


@cli.command(name="import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--replace", is_flag=True, help="a conversation already in the store is replaced by the file's")
@click.option("--merge", is_flag=True, help="a conversation already in the store gets the file's turns it lacks")
@click.option("--model", type=click.Path(), envvar="LOCALPAGER_MODEL",
              help="GGUF file whose tokenizer counts tokens (plain files, merges)")
@click.pass_context
def import_cmd(ctx, file, replace, merge, model):
    """Read an export (or an interchange JSONL file) into the store."""
    if replace and merge:
        raise click.UsageError("give --replace or --merge, not both")
    with friendly_errors():
        mode = ImportMode.REPLACE if replace else ImportMode.MERGE if merge else ImportMode.ERROR
        bars = Bars()
        try:
            report = open_pager(ctx, model).import_file(
                file, mode, progress=lambda stage, done, total: bars(stage, done, total))
        finally:
            bars.close()
    extra = "".join(f", {len(v)} {k}" for k, v in (("replaced", report.replaced), ("merged", report.merged)) if v)
    click.echo(f"imported {report.conversations} conversations ({report.turns} turns{extra})")
    for note in report.notes:
        click.echo(note, err=True)


def _migrate_with_bar(src, dst, replace: bool):
    """``migrate_store`` a conversation at a time behind a bar on stderr (shown after a second): those new to
    the target in the source's order, then those it replaces in one call (one erase of the target)."""
    from tqdm import tqdm

    from .store.migrate import MigrateReport, migrate_store
    from .store.base import StoreError

    ids = [c.id for c in src.list_conversations()]
    taken = [i for i in ids if dst.has_conversation(i)]
    if taken and not replace:
        raise StoreError(f"already in {dst.path}: {', '.join(taken)} (use --replace to overwrite them)")
    report = MigrateReport(replaced=taken)
    with tqdm(total=len(ids), desc="migrate", unit="conv", delay=1.0, file=sys.stderr) as bar:
        for batch, replacing in [([i], False) for i in ids if i not in taken] + ([(taken, True)] if taken else []):
            part = migrate_store(src, dst, batch, replace=replacing)
            for name in ("conversations", "turns", "vectors", "traces"):
                setattr(report, name, getattr(report, name) + getattr(part, name))
            report.ids += part.ids
            bar.update(len(batch))
    return report


@cli.command(name="migrate-store")
@click.argument("source")
@click.argument("target")
@click.option("--replace", is_flag=True, help="a conversation already in TARGET is replaced by SOURCE's")
def migrate_store_cmd(source, target, replace):
    """Copy every conversation of SOURCE into TARGET, each a SQLite file or a postgresql:// URL (a laptop's
    store into a team's database): turns, pages, pins, corrections, probes, traces and vectors. SOURCE is left
    as it was; an encrypted SOURCE: export it, then import the file."""
    from .store.location import open_store

    with friendly_errors():
        src = open_store(source, create=False)
        try:
            dst = open_store(target)
            try:
                report = _migrate_with_bar(src, dst, replace)
            finally:
                dst.close()
        finally:
            src.close()
    extra = f", {len(report.replaced)} replaced" if report.replaced else ""
    click.echo(f"copied {report.conversations} conversations ({report.turns} turns, {report.vectors} vectors, "
               f"{report.traces} traces{extra}) from {src.path} to {dst.path}")


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


def _dataset(path: str, fmt: str):
    from .store.loaders import load_conversations

    loaded = load_conversations(path, fmt)
    for warning in loaded.warnings:
        click.echo(f"warning: {warning}", err=True)
    return loaded.conversations


@cli.command()
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

    from .backends.tokenizers import counter_for
    from .lab.simulate import simulate as run
    from .lab.sweep import simulation_report, write_simulation

    with friendly_errors():
        conversations = _dataset(dataset, fmt)[:limit]
        result = run(conversations, boundaries, evictions, budget, retrievers, k, counter_for(model),
                     progress=lambda runs: tqdm(runs, desc="simulate", file=sys.stderr))
    click.echo(simulation_report(result))
    if json_out:
        click.echo(f"wrote {write_simulation(json_out, result)}")


@cli.command(name="eval")
@click.argument("dataset", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=ChoiceOf(FileFormat, "file format"), default=FileFormat.AUTO.value,
              show_default=True)
@click.option("--strategy", "strategies", type=list_of(EvalStrategy, "strategy"),
              default=EvalStrategy.BOOKMARKS.value, show_default=True, help="strategies (one run each)")
@click.option("--page-choice", type=ChoiceOf(PageChoice, "page choice"), default=DEFAULT_PAGE_CHOICE.value,
              show_default=True, help="who picks the pages the bookmarks strategy injects: the model, the ranking or both")
@click.option("--boundary", type=BoundaryName(), default=DEFAULT_BOUNDARY.value, show_default=True,
              help="where one page ends and the next begins")
@click.option("--eviction", "evictions", type=list_of(Eviction, "eviction policy"), default=DEFAULT_EVICTION.value,
              show_default=True, help="eviction policies (one run each)")
@click.option("--keywords", "keyword_strategies", type=list_of(KeywordStrategy, "keyword strategy"),
              default=DEFAULT_KEYWORDS.value, show_default=True,
              help="keyword strategies (one run each; llm-*, hybrid and auto ask the model)")
@click.option("--worth", is_flag=True, help="the model judges each closed page; pages not worth keeping leave first")
@click.option("--signal", type=ChoiceOf(Signal, "signal"), default=DEFAULT_SIGNAL.value, show_default=True,
              help="what of a page the reranking compares with the question")
@click.option("--bookmark-format", type=ChoiceOf(BookmarkFormat, "bookmark format"),
              default=DEFAULT_BOOKMARK_FORMAT.value, show_default=True)
@click.option("--budget", type=click.IntRange(min=1), default=DEFAULT_BUDGET, show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="at most N probes per conversation")
@click.option("--conversations", "which_conversations", default=None,
              help="N: the first N conversations; A-B: conversations A to B (1-based, inclusive)")
@click.option("--categories", default=None,
              help="LoCoMo question categories to ask, comma-separated (e.g. 1,2,3,4); default: all with evidence")
@click.option("--trigger", type=ChoiceOf(Trigger, "trigger"), default=DEFAULT_TRIGGER.value, show_default=True,
              help="gate: page in when the recall gate says memory is relevant; question: every question while "
                   "pages are evicted (the rule before the gate); off: only when the model asks")
@click.option("--recall", "recall_mode", type=ChoiceOf(RecallMode, "recall mode", EVAL_RECALL_MODES),
              default=RecallMode.AUTO.value, show_default=True,
              help="always: the model must name pages on every probe (compares page choices on the same recalls)")
@click.option("--excerpt", default="0", show_default=True,
              help="turns each side of a recalled page's best turn to inject, or 'page' for the whole page")
@click.option("--no-oracle", is_flag=True, help="skip the evidence-injected ceiling run")
@click.option("--hide-bookmarks", is_flag=True,
              help="no bookmark list in the prompt: pages come back by the trigger alone")
@click.option("--layout", "layouts", type=list_of(Layout, "layout"), default=DEFAULT_LAYOUT.value, show_default=True,
              help="answer layouts (one run each)")
@click.option("--pages", "max_pages", type=click.IntRange(1, 8), default=None,
              help="pages one recall injects at most (default: the reranking selector's)")
@click.option("--several-pages", type=click.IntRange(1, 8), default=None,
              help="pages a recall injects at most when the question asks for several things (default: the reranking "
                   "selector's)")
@click.option("--repeat-penalty", type=float, default=1.0, show_default=True,
              help="llama.cpp repeat penalty for answers (the repetition guard runs regardless)")
@click.option("--model", type=click.Path(), envvar="LOCALPAGER_MODEL")
@click.option("--json", "json_out", type=click.Path(dir_okay=False),
              help="write JSON here, with a Markdown table and a PNG beside it")
@click.pass_context
def evaluate_cmd(ctx, dataset, fmt, strategies, page_choice, boundary, evictions, keyword_strategies, worth, signal,
                 bookmark_format, budget, limit, which_conversations, categories, trigger, recall_mode, excerpt,
                 no_oracle, hide_bookmarks, layouts, max_pages, several_pages, repeat_penalty, model, json_out):
    """Answer DATASET's probes with the local model and score them, for each strategy."""
    from tqdm import tqdm

    export_backend(ctx)
    from .core.pager import PagingConfig
    from .lab.evaluate import EvalConfig
    from .lab.report import eval_markdown
    from .lab.sweep import EvalSweep, run_eval_sweep
    from .retrieval.rerank import RerankSettings

    with friendly_errors():
        conversations = _dataset(dataset, fmt)[conversation_slice(which_conversations)]
        paging = PagingConfig(boundary=boundary, bookmark_format=bookmark_format, budget=budget, worth=worth)
        config = EvalConfig(page_choice=page_choice, limit=limit, recall_mode=recall_mode,
                            oracle=not no_oracle, model=model,
                            excerpt=None if excerpt == "page" else int(excerpt), trigger=trigger, signal=signal,
                            show_bookmarks=not hide_bookmarks, repeat_penalty=repeat_penalty,
                            max_pages=max_pages or RerankSettings.max_pages,
                            pages_when_several=several_pages or RerankSettings.pages_when_several,
                            categories=list(positive_ints(categories, "--categories")) if categories else None)
        sweep = EvalSweep(strategies, evictions, keyword_strategies, layouts, paging, config)
        bar = lambda name: lambda items: tqdm(items, desc=name, unit="probe", file=sys.stderr)
        runs, written = run_eval_sweep(conversations, sweep, progress=bar, json_out=json_out)
    click.echo(eval_markdown(runs))
    if json_out:
        for path in written:
            click.echo(f"wrote {path}")


@cli.command()
@click.option("--quick", is_flag=True, help="two lengths, fewer turns: a few minutes")
@click.option("--turns", "probe_turns", type=click.IntRange(min=1), default=None, help="probe turns per length (default 20, quick 6)")
@click.option("--cold-turns", type=click.IntRange(min=20), default=3200, show_default=True,
              help="turns of the stored conversation a new process answers on")
@click.option("--eviction-turns", type=click.IntRange(min=20), default=None,
              help="turns replayed to count tokens on eviction turns (default 400, quick 200; more at larger budgets)")
@click.option("--eviction-budgets", default="512,2048", show_default=True,
              help="comma-separated budgets at which tokens on eviction turns are counted")
@click.option("--model", type=click.Path(), envvar="LOCALPAGER_MODEL")
@click.option("--warm", is_flag=True,
              help="each conversation warms up before its first question, as `chat` does while you type (the "
                   "first answer then finds the models and indexes loaded)")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="write JSON here, and a PNG plot beside it")
@click.pass_context
def bench(ctx, quick, probe_turns, cold_turns, eviction_turns, eviction_budgets, model, warm, json_out):
    """Recall latency per stage and its ratio to the hardware floor, by conversation length."""
    from tqdm import tqdm

    export_backend(ctx)
    from .lab.bench import BenchConfig, plot, report_line, run_bench

    config = BenchConfig(quick=quick, probe_turns=probe_turns or (6 if quick else 20), model=model, warm=warm,
                         cold_turns=cold_turns, eviction_turns=eviction_turns,
                         eviction_budgets=positive_ints(eviction_budgets, "--eviction-budgets"))
    with friendly_errors():
        result = run_bench(config, progress=lambda jobs: tqdm(jobs, desc="bench", file=sys.stderr),
                           log=lambda s: click.echo(s, err=True))
    click.echo(f"ratio to floor (median turn): {result['ratio_to_floor']}   flatness: {result['flatness']} "
               f"(full context: {result['flatness_full']})")
    click.echo("p50 ms by length: " + json.dumps(result["p50_ms"]))
    click.echo(report_line(result))
    click.echo("rerank ms by index size: " + json.dumps({n: r['total_ms'] for n, r in result['rerank_ms'].items()}))
    click.echo(f"p95 ms {result['p95_ms_with_first']} with each run's first answer, {result['p95_ms_after_first']} "
               f"after it; warm answer p50 {result['warm_answer_ms']} ms; each run's first answer "
               f"{result['first_answer_ms']} ms ({result['first_vs_p50']} of the p50)")
    click.echo(f"new process to its first answer ({config.cold_turns} stored turns): {result['cold_first_answer_ms']} ms; "
               f"small talk {result['cold_small_talk_ms']['unsaved']} ms, with the saved KV cache "
               f"{result['cold_small_talk_ms']['resumed']} ms")
    click.echo("tokens evaluated on eviction turns (p50, spliced / full re-read): " + ", ".join(
        f"budget {b}: {e['eviction_tokens_evaluated']} / {e['eviction_tokens_full']}" for b, e in result["evictions"].items()))
    click.echo(f"peak RSS {result['peak_rss_mb']} MB, --help {result['help_ms']} ms")
    busy = result["busy"]
    click.echo(f"beside a busy process: p50 {busy['p50_busy_ms']} ms against {busy['p50_idle_ms']} ms idle "
               f"(busy_ratio {result['busy_ratio']}; threads {busy['threads_busy']} against {busy['threads_idle']})")
    if json_out:
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(json.dumps(result, indent=2))
        with friendly_errors():
            png = plot(result, Path(json_out).with_suffix(".png"))
        click.echo(f"wrote {json_out} and {png}")


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on (loopback only "
              "unless --allow-remote)")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option("--api-key", envvar="LOCALPAGER_API_KEY", default=None,
              help="require Authorization: Bearer KEY on /v1; better from the environment (LOCALPAGER_API_KEY) or "
                   "--api-key-file, since other users of the machine see a command line (ps)")
@click.option("--api-key-file", type=click.Path(dir_okay=False), default=None,
              help="read the API key from this file (one line; keep it readable by you only)")
@click.option("--api-keys-file", type=click.Path(dir_okay=False), default=None,
              help="one NAMESPACE KEY a line: a request's key reaches its namespace's conversations only (each "
                   "namespace a store of its own: docs/deployment.md)")
@click.option("--namespace", default=None,
              help="serve one namespace's conversations only (a store of its own; e.g. one user's --api-key)")
@click.option("--cors-origin", "cors_origins", multiple=True,
              help="allow this browser origin to call the API and change memory (repeatable; default none: only "
                   "loopback pages and the inspector may change anything; '*' needs an API key)")
@click.option("--allow-remote", is_flag=True, help="allow a --host reachable from other machines")
@click.option("--budget", type=click.IntRange(min=1), default=None,
              help="memory budget in model tokens for every conversation the server answers, while it runs "
                   "(the stored budget stays; `localpager budget` stores one)")
@click.option("--max-tokens", type=click.IntRange(min=1), default=512, show_default=True,
              help="cap on a request's max_tokens")
@click.option("--max-body", type=click.IntRange(min=1024), default=1_000_000, show_default=True,
              help="largest request body in bytes")
@click.option("--default-conversation", default=None,
              help="conversation for requests that name none (default: such a request is a 400)")
@click.option("--model", type=click.Path(), envvar="LOCALPAGER_MODEL",
              help="GGUF chat model (default: SmolLM2-135M-Instruct; env LOCALPAGER_MODEL)")
@click.option("--n-ctx", type=click.IntRange(min=128), default=2048, show_default=True, help="model context size")
@click.option("--no-preload", is_flag=True, help="load the models on the first request, not at start-up")
@click.pass_context
def serve(ctx, host, port, api_key, api_key_file, api_keys_file, namespace, cors_origins, allow_remote, budget,
          max_tokens, max_body, default_conversation, model, n_ctx, no_preload):
    """Serve an OpenAI-compatible chat API with memory (/v1/chat/completions) and a memory inspector (/).

    Name the conversation with the header X-Conversation-Id (or X-OpenWebUI-Chat-Id); an id outside ASCII
    goes percent-encoded as UTF-8 (%C5%81ukasz), and the server's headers send ids the same way.

    The API key: LOCALPAGER_API_KEY=KEY localpager serve, or --api-key-file FILE."""
    from .serving.protocol import check_bind, check_conversation_id, check_cors

    api_key = serve_api_key(ctx, api_key, api_key_file)
    api_keys = serve_api_keys(ctx, api_keys_file, api_key_file, namespace)
    try:
        check_cors(cors_origins, api_key or api_keys)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if budget is not None and budget >= n_ctx:
        raise click.UsageError(f"--budget {budget} leaves no room in a context of {n_ctx} tokens (--n-ctx) for the "
                               "question and the answer")

    try:
        from .serving.app import ServerOptions
        from .serving.app import serve as run_server
    except ImportError as exc:
        if (exc.name or "").split(".")[0] in ("fastapi", "uvicorn", "sse_starlette", "starlette", "pydantic", "anyio"):
            click.echo("localpager serve needs the server extra: pip install 'localpager[server]'", err=True)
            ctx.exit(1)
        raise
    with friendly_errors():
        warning = check_bind(host, allow_remote)
        if default_conversation:
            check_conversation_id(default_conversation, "--default-conversation")
        lp = open_pager(ctx, model, n_ctx=n_ctx)
    if warning:
        click.echo(warning, err=True)
    options = ServerOptions(api_key=None if api_keys else api_key, api_keys=api_keys, namespace=namespace,
                            cors_origins=cors_origins, max_tokens_cap=max_tokens, budget=budget, max_body_bytes=max_body,
                            default_conversation=default_conversation, preload=not no_preload)
    with friendly_errors():
        run_server(lp, host, port, options)


def serve_api_keys(ctx: click.Context, keys_file: str | None, key_file: str | None,
                   namespace: str | None) -> dict[str, str] | None:
    """``--api-keys-file``: {key: namespace}; None without it."""
    from click.core import ParameterSource

    if keys_file is None:
        if namespace is not None:
            from .store.naming import check_namespace

            try:
                check_namespace(namespace)
            except ValueError as exc:
                raise click.UsageError(str(exc)) from None
        return None
    if key_file is not None or ctx.get_parameter_source("api_key") == ParameterSource.COMMANDLINE or namespace:
        raise click.UsageError("--api-keys-file names every key and its namespace: give no --api-key, "
                               "--api-key-file or --namespace with it")
    from .serving.protocol import parse_api_keys

    try:
        return parse_api_keys(Path(keys_file).read_text(encoding="utf-8"), f"--api-keys-file {keys_file}")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None


def serve_api_key(ctx: click.Context, api_key: str | None, key_file: str | None) -> str | None:
    """The server's key: from ``--api-key-file``, ``LOCALPAGER_API_KEY`` or ``--api-key`` (with a warning:
    other users of the machine can read a command line)."""
    from click.core import ParameterSource

    on_command_line = api_key is not None and ctx.get_parameter_source("api_key") == ParameterSource.COMMANDLINE
    if key_file is not None:
        if on_command_line:
            raise click.UsageError("give --api-key or --api-key-file, not both")
        try:
            api_key = Path(key_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise click.UsageError(f"cannot read --api-key-file {key_file}: {exc}") from None
    elif on_command_line:
        click.echo("warning: --api-key on the command line is visible to other users of this machine (ps); "
                   "use LOCALPAGER_API_KEY or --api-key-file", err=True)
    if api_key is None or (key_file is None and not api_key):
        return None  # an empty LOCALPAGER_API_KEY means no key, as before
    if not api_key or not api_key.isascii() or not api_key.isprintable() or " " in api_key:
        raise click.UsageError("the API key must be one word of visible ASCII characters"
                               + (f" (in {key_file})" if key_file else ""))
    return api_key


@cli.command(name="mcp")
@click.option("--conversation", default=None,
              help="serve this conversation only: the tools take no conversation argument (for an app without "
                   "conversations)")
@click.option("--read-only", is_flag=True, help="only recall, search, bookmarks and conversations: nothing is "
              "added, corrected or erased")
@click.pass_context
def mcp_cmd(ctx, conversation, read_only):
    """Serve memory as MCP tools over stdio, for an app whose own model answers (Claude Desktop, LM Studio,
    Jan, Cursor, Continue): recall, search, bookmarks, conversations, remember, forget, correct.

    Loads no GGUF model; stdout carries protocol messages only. Setup per app: docs/mcp.md."""
    try:
        from .serving.mcp import open_store, serve_stdio
    except ImportError as exc:
        if (exc.name or "").split(".")[0] in ("mcp", "mcp_types"):
            raise click.ClickException("localpager mcp needs the mcp extra: pip install 'localpager[mcp]'") from None
        raise
    from .store.location import store_location

    with friendly_errors():
        path = store_location(ctx.obj["store"])
    if read_only and isinstance(path, Path) and not path.exists():
        raise click.ClickException(f"no store at {path} (--read-only opens an existing store)")
    with friendly_errors():
        lp = open_store(path, key=store_key(ctx))
        ctx.call_on_close(lp.close)
        serve_stdio(lp, conversation=conversation, read_only=read_only)


def main() -> None:
    cli()
if __name__ == "__main__":
    main()
