"""Conversations into and out of a store: ``ingest`` (a conversation file, paged), ``export`` and ``import``
(everything, to a JSONL file and back), ``migrate-store`` (a store into another, SQLite or PostgreSQL)."""

from __future__ import annotations

import sys
from contextlib import suppress

import click

from ..core.choices import (
    DEFAULT_BOOKMARK_FORMAT,
    DEFAULT_BOUNDARY,
    DEFAULT_EVICTION,
    DEFAULT_KEYWORDS,
    BookmarkFormat,
    Eviction,
    KeywordStrategy,
)
from ..core.pager import DEFAULT_BUDGET
from ..memory.choices import ImportMode
from ..store.base import StoreError
from ..store.choices import FileFormat
from ..store.sqlite import remove_empty
from .options import OFFERED_KEYWORDS, BoundaryName, ChoiceOf, user_option
from .output import Bars, echo_json
from .session import friendly_errors, new_store_path, open_pager, open_user, user_name


@click.command()
@click.argument("file", type=click.Path())
@click.option("--format", "fmt", type=ChoiceOf(FileFormat, "file format"), default=FileFormat.AUTO.value,
              show_default=True, help="auto also finds a ChatGPT or Claude export and a message list")
@click.option("--boundary", type=BoundaryName(), default=DEFAULT_BOUNDARY.value, show_default=True,
              help="where one page ends and the next begins")
@click.option("--eviction", type=ChoiceOf(Eviction, "eviction policy"), default=DEFAULT_EVICTION.value,
              show_default=True, help="which resident page leaves the prompt first")
@click.option("--keywords", type=ChoiceOf(KeywordStrategy, "keyword strategy", OFFERED_KEYWORDS),
              default=DEFAULT_KEYWORDS.value, show_default=True,
              help="how bookmark keywords are chosen (llm-*, hybrid and auto ask the model)")
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
@user_option
@click.pass_context
def ingest(ctx, file, fmt, boundary, eviction, keywords, worth, bookmark_format, budget, model, replace, embed,
           as_json):
    """Store the conversations of FILE (interchange JSONL or LoCoMo JSON), paged. With --user, those the file
    names no user for are that user's.

    FILE may also be a chat history from another service: a ChatGPT or Claude export (the .zip as downloaded, the
    unzipped folder, or its conversations.json) or an OpenAI-style message list (JSON or JSONL). Importing one again
    adds only what is new: the messages of conversations continued since, and new conversations.

    A file that fails its checks stores nothing, and a store this command created for it is removed again."""
    from ..core.pager import PagingConfig

    with friendly_errors():
        config = PagingConfig(boundary=boundary, eviction=eviction, keywords=keywords,
                              bookmark_format=bookmark_format, budget=budget, worth=worth)
        created = new_store_path(ctx)
        lp = open_pager(ctx, model)
        bars = Bars(disabled=as_json)
        bars.units["read"] = "conversation"

        def on_conversations(stage, done, total):  # an export: read whole first, then stored
            if stage == "read":
                bars("read", done, total)
            else:
                bars.note("ingest", f"{done}/{total} conversations")

        try:
            report = lp.ingest(file, fmt, config, replace=replace, on_turns=bars.stage("ingest"), embed=embed,
                               user=user_name(ctx), on_conversations=on_conversations)
            for conv_id in report.ids if embed else ():
                lp.conversation(conv_id).prepare(progress=bars.stage("embed"))
        except BaseException:
            if created is not None:  # the store this made, with nothing in it: gone again
                with suppress(OSError, StoreError):  # a courtesy: the error the user sees is the file's
                    lp.close()
                    remove_empty(created)
            raise
        finally:
            bars.close()
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        echo_json(report.__dict__)
    else:
        again = (f"; {len(report.continued)} continued, {report.unchanged} unchanged"
                 if report.continued or report.unchanged else "")
        click.echo(f"stored {report.conversations} conversations, {report.turns} turns, {report.pages} pages "
                   f"({report.evicted} evicted), {report.probes} probes in {lp.store.path}{again}")


@click.command(name="export")
@click.argument("conv_id", required=False)
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="JSONL file to write")
@click.option("--vectors", is_flag=True, help="include the embeddings (import then needs no embedder)")
@user_option
@click.pass_context
def export_cmd(ctx, conv_id, output, vectors):
    """Write CONV_ID (default: every conversation; with --user, every one of that user's) to a JSONL file: turns,
    times, speakers, pages, pins, corrections, settings, and whose it is."""
    with friendly_errors():
        lp = open_pager(ctx, create=False)
        if conv_id is None and user_name(ctx) is not None:
            n = open_user(ctx, lp).export(output, vectors=vectors)
        else:
            if conv_id is not None and user_name(ctx) is not None:
                lp.conversation(conv_id, user=user_name(ctx))  # theirs, or one line naming whose it is
            n = lp.export(output, [conv_id] if conv_id else None, vectors=vectors)
    click.echo(f"exported {n} conversations to {output}")


@click.command(name="import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--replace", is_flag=True, help="a conversation already in the store is replaced by the file's")
@click.option("--merge", is_flag=True, help="a conversation already in the store gets the file's turns it lacks")
@click.option("--model", type=click.Path(), envvar="LOCALPAGER_MODEL",
              help="GGUF file whose tokenizer counts tokens (plain files, merges)")
@user_option
@click.pass_context
def import_cmd(ctx, file, replace, merge, model):
    """Read an export (or an interchange JSONL file) into the store. With --user, the conversations the file names
    no user for are that user's."""
    if replace and merge:
        raise click.UsageError("give --replace or --merge, not both")
    with friendly_errors():
        mode = ImportMode.REPLACE if replace else ImportMode.MERGE if merge else ImportMode.ERROR
        bars = Bars()
        try:
            report = open_pager(ctx, model).import_file(file, mode, progress=bars, user=user_name(ctx))
        finally:
            bars.close()
    extra = "".join(f", {len(v)} {k}" for k, v in (("replaced", report.replaced), ("merged", report.merged)) if v)
    click.echo(f"imported {report.conversations} conversations ({report.turns} turns{extra})")
    for note in report.notes:
        click.echo(note, err=True)


@click.command(name="migrate-store")
@click.argument("source")
@click.argument("target")
@click.option("--replace", is_flag=True, help="a conversation already in TARGET is replaced by SOURCE's")
def migrate_store_cmd(source, target, replace):
    """Copy every conversation of SOURCE into TARGET, each a SQLite file or a postgresql:// URL (a laptop's
    store into a team's database): turns, pages, pins, corrections, probes, traces and vectors. SOURCE is left
    as it was; an encrypted SOURCE: export it, then import the file."""
    from ..store.location import open_store

    with friendly_errors():
        src = open_store(source, create=False)
        try:
            dst = open_store(target)
            try:
                report = migrate_with_bar(src, dst, replace)
            finally:
                dst.close()
        finally:
            src.close()
    extra = f", {len(report.replaced)} replaced" if report.replaced else ""
    click.echo(f"copied {report.conversations} conversations ({report.turns} turns, {report.vectors} vectors, "
               f"{report.traces} traces{extra}) from {src.path} to {dst.path}")


def migrate_with_bar(src, dst, replace: bool):
    """``migrate_store`` a conversation at a time behind a bar on stderr (shown after a second): those new to
    the target in the source's order, then those it replaces in one call (one erase of the target)."""
    from tqdm import tqdm

    from ..store.migrate import MigrateReport, migrate_store

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


COMMANDS = (ingest, export_cmd, import_cmd, migrate_store_cmd)
