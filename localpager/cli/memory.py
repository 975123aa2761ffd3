"""The commands over what a store remembers: list conversations and their pages, bookmarks and traces, set a
budget, pin a page, and the user's controls (search, forget, correct, the standing facts: remember one, edit or
delete one). Each one a call of the library API (``LocalPager``, ``Conversation``); no chat model loads unless one
needs token counts."""

from __future__ import annotations

import dataclasses
import shlex

import click

from ..core.choices import BookmarkFormat
from ..store.base import PinRefused
from .options import ChoiceOf, user_option
from .output import Bars, echo_json, page_line, prepare_recall
from .session import friendly_errors, open_conversation, open_pager, open_user, scope, user_name


@click.command()
@click.option("--json", "as_json", is_flag=True)
@user_option
@click.pass_context
def conversations(ctx, as_json):
    """List the stored conversations (with --user, that user's), each with its user if it has one."""
    with friendly_errors():
        lp = open_pager(ctx, create=False)
        infos = open_user(ctx, lp).conversations() if user_name(ctx) is not None else lp.conversations()
    if as_json:
        echo_json([i.__dict__ for i in infos])
        return
    for i in infos:
        whose = f"\tuser {i.user}" if i.user is not None else ""
        click.echo(f"{i.id}\t{i.turns} turns\t{i.pages} pages ({i.evicted} evicted)\t{i.probes} probes{whose}")


@click.command()
@click.argument("conv_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def pages(ctx, conv_id, as_json):
    """The pages of a conversation."""
    with friendly_errors():
        conv = open_conversation(ctx, conv_id)
    if as_json:
        echo_json([{k: v for k, v in p.__dict__.items() if k != "text"} for p in conv.pages])
        return
    for p in conv.pages:
        click.echo(page_line(p))


@click.command()
@click.argument("conv_id")
@click.argument("page_id", type=int)
@click.option("--unpin", is_flag=True)
@click.pass_context
def pin(ctx, conv_id, page_id, unpin):
    """Pin page PAGE_ID of CONV_ID so that it is never evicted (or --unpin it)."""
    with friendly_errors():
        try:
            page = open_conversation(ctx, conv_id).pin(page_id, not unpin)
        except KeyError as exc:
            raise click.ClickException(exc.args[0]) from None
    state = "pinned" if page.pinned else "unpinned"
    click.echo(f"p{page.page_id} {state}{' (it is evicted; it stays evicted)' if page.evicted and page.pinned else ''}")


@click.command()
@click.argument("conv_id")
@click.option("--format", "fmt", type=ChoiceOf(BookmarkFormat, "bookmark format"), default=None,
              help="bookmark format (default: the conversation's)")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def bookmarks(ctx, conv_id, fmt, as_json):
    """One bookmark a line for every page of a conversation."""
    with friendly_errors():
        conv = open_conversation(ctx, conv_id)
        lines = conv.bookmarks(fmt)
    if as_json:
        echo_json([{"page_id": p.page_id, "evicted": p.evicted, "bookmark": b} for p, b in zip(conv.pages, lines)])
        return
    for line in lines:
        click.echo(line)


@click.command()
@click.argument("conv_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def log(ctx, conv_id, as_json):
    """The stored traces of CONV_ID's answered turns."""
    from ..runtime.trace import format_trace

    with friendly_errors():
        traces = open_conversation(ctx, conv_id).traces()
    if as_json:
        echo_json(traces)
        return
    for t in traces:
        if t.get("status") in ("unanswered", "interrupted"):  # a question whose answer never came (or not yet)
            reason = f": {t['reason']}" if t.get("reason") else " (being answered, or its process died)"
            click.echo(f"turn {t['turn']}: {t.get('question', '')[:70]!r}\n  no answer, {t['status']}{reason}")
        else:
            click.echo(format_trace(t))


@click.command()
@click.argument("conv_id")
@click.argument("tokens", type=click.IntRange(min=1), required=False)
@click.option("--model", type=click.Path(), envvar="LOCALPAGER_MODEL", help="GGUF file whose tokenizer counts tokens")
@click.pass_context
def budget(ctx, conv_id, tokens, model):
    """Show CONV_ID's stored memory budget, or store TOKENS as its budget (evicting at once if over it)."""
    with friendly_errors():
        conv = open_pager(ctx, model, create=False).conversation(conv_id)
        if tokens is None:
            click.echo(conv.budget)
            return
        conv.set_budget(tokens)
    click.echo(f"{conv_id}: budget {tokens} tokens")


# -- memory the user controls: forget, search, correct ---------------------------------------------------
@click.command()
@click.argument("conv_id", required=False)
@click.option("--turn", type=int, default=None, help="forget turn N (as `log` and citations number them)")
@click.option("--page", type=int, default=None, help="forget every turn of page N")
@click.option("--match", default=None, help="forget every turn containing TEXT (case-insensitive)")
@click.option("--dry-run", is_flag=True, help="list what would be forgotten; change nothing")
@click.option("--yes", is_flag=True, help="no confirmation when forgetting a whole conversation")
@click.option("--finish", is_flag=True, help="finish rewriting the store's files after a forget that could not")
@click.option("--imported", is_flag=True,
              help="with --user and no CONV_ID: every conversation of the user's that came from an export "
                   "(ChatGPT, Claude, a message list), whole")
@click.option("--json", "as_json", is_flag=True)
@user_option
@click.pass_context
def forget(ctx, conv_id, turn, page, match, dry_run, yes, finish, imported, as_json):
    """Forget turns of CONV_ID (or, with no --turn/--page/--match, the whole conversation): their text,
    vectors, bookmark words and the traces repeating them, erased from the store's files. With --user and no
    CONV_ID, --match forgets in every one of that user's conversations, and --imported forgets every conversation
    of theirs that `ingest` brought in from an export, with the store's files rewritten once. Exits 1 if the files
    could not be rewritten (another process was reading the store): run it again, or --finish."""
    if sum(x is not None for x in (turn, page, match)) + imported > 1:
        raise click.UsageError("give one of --turn, --page, --match or --imported")
    if finish and (dry_run or imported or any(x is not None for x in (turn, page, match))):
        raise click.UsageError("--finish takes no --turn, --page, --match, --imported or --dry-run")
    if imported and (conv_id is not None or user_name(ctx) is None):
        raise click.UsageError("--imported forgets a user's imported conversations: give --user NAME and no "
                               "CONV_ID (a conversation imported without --user is forgotten by its id)")
    if not finish:
        scope(ctx, conv_id, "forget --match in")
    if conv_id is None and not finish and match is None and not imported:
        raise click.UsageError("--user without CONV_ID forgets by --match TEXT or --imported (--turn, --page and "
                               "a whole conversation need its CONV_ID)")
    with friendly_errors():
        lp = open_pager(ctx, create=False)
        if finish:
            from ..memory.controls import ForgetReport

            done = lp.finish_erase()
            report = ForgetReport(conv_id or "", rewritten=done, erased=done, rewrite_pending=not done)
        elif imported:
            user = open_user(ctx, lp)
            if not dry_run and not yes:
                n = len(user.imported())
                click.confirm(f"forget the {n} imported conversations of user {user.name} for good?", abort=True,
                              err=True)
            report = user.forget(imported=True, dry_run=dry_run)
        elif conv_id is None:
            report = open_user(ctx, lp).forget(match=match, dry_run=dry_run)
        elif turn is None and page is None and match is None:
            if user_name(ctx) is not None:
                lp.conversation(conv_id, user=user_name(ctx))  # theirs, or one line naming whose it is
            if not dry_run and not yes:
                preview = lp.forget_conversation(conv_id, dry_run=True)
                click.confirm(f"forget conversation {conv_id} ({len(preview.turns)} turns) for good?", abort=True,
                              err=True)
            report = lp.forget_conversation(conv_id, dry_run=dry_run)
        else:
            report = lp.conversation(conv_id, user=user_name(ctx)).forget(turn=turn, page=page, match=match,
                                                                          dry_run=dry_run)
    if as_json:
        echo_json(report.to_dict())
    elif finish:
        click.echo("rewrote the store's files: nothing forgotten is left in them" if report.rewritten else
                   "could not rewrite the store's files: another process is reading the store; run this again "
                   "once it has closed")
    else:
        for line in report.lines():
            click.echo(line)
        if imported and report.reports:
            click.echo("  note: the exports they came from still hold them, and ingesting one again brings them "
                       "back: delete those files too if you meant them gone")
    if report.rewrite_pending:  # the text is still on disk: not a success
        ctx.exit(1)


@click.command()
@click.argument("conv_id", required=False)
@click.argument("query", required=False, metavar="QUERY")
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@user_option
@click.pass_context
def search(ctx, conv_id, query, limit, as_json):
    """What CONV_ID remembers about QUERY: turns ranked as a recall ranks them (loads the embedder only). With
    --user and no CONV_ID: every one of that user's conversations, each hit naming its conversation."""
    if query is None and user_name(ctx) is not None:  # localpager --user NAME search QUERY
        conv_id, query = None, conv_id
    if query is None:
        raise click.UsageError("Missing argument 'QUERY'." if conv_id is not None else "Missing argument 'CONV_ID'.")
    with friendly_errors():
        if conv_id is None:
            lp = open_pager(ctx, create=False)
            user = open_user(ctx, lp)
            for info in user.conversations():
                prepare_recall(lp.conversation(info.id), Bars(disabled=as_json))
            hits = user.search(query, limit)
        else:
            conv = open_conversation(ctx, conv_id)
            prepare_recall(conv, Bars(disabled=as_json))
            hits = conv.search(query, limit)
    if as_json:
        echo_json([h.to_dict() for h in hits])
        return
    for h in hits:
        click.echo(h.line())
    if not hits:
        click.echo("(nothing remembered)")


@click.command()
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


def fact_ref(ref: str, conv_id: str | None) -> tuple[str | None, int]:
    """A standing fact as a command names it: ``N`` or ``#N`` (of ``conv_id``), or ``CONV:N`` (as a user's listing
    names it); (conversation, fact id), the conversation None when neither gives one. A ``ValueError`` says what
    is wrong."""
    conv, sep, number = ref.strip().rpartition(":")
    number = number.strip().lstrip("#")
    if not number.isdigit() or (sep and not conv):
        raise ValueError(f"{ref!r} is not a standing fact's number: N, or CONV:N as a user's facts are listed")
    if sep and conv_id is not None and conv != conv_id:
        raise ValueError(f"fact {ref!r} is not one of {conv_id}'s")
    return (conv if sep else conv_id), int(number)


@click.command()
@click.argument("conv_id", required=False)
@click.argument("text", required=False)
@click.option("--json", "as_json", is_flag=True)
@user_option
@click.pass_context
def remember(ctx, conv_id, text, as_json):
    """Keep TEXT as something the user said about themselves, without a reply: it becomes standing facts as any
    turn does, and one fact (kind stated) when none is found in it. No model answers (its tokenizer loads to page
    the turn). With --user and no CONV_ID: that user's memory conversation, NAME-memory, created as theirs on
    first use."""
    from ..memory.users import memory_conversation

    if text is None:  # localpager --user NAME remember TEXT
        conv_id, text = None, conv_id
    if text is None:
        raise click.UsageError("Missing argument 'TEXT'.")
    if conv_id is None and user_name(ctx) is None:
        raise click.UsageError("give CONV_ID, or --user NAME to remember it in that user's memory conversation")
    with friendly_errors():
        if conv_id is None:
            made = open_pager(ctx).user(user_name(ctx), create=True).remember(text)
            conv_id = memory_conversation(user_name(ctx))
        else:
            made = open_conversation(ctx, conv_id).remember(text)
    if as_json:
        echo_json({"conversation": conv_id, "facts": [f.to_dict() for f in made]})
        return
    for fact in made:
        click.echo(f"remembered in {conv_id}: {dataclasses.replace(fact, conv_id=None).line()}")


@click.command()
@click.argument("conv_id", required=False)
@click.option("--all", "everything", is_flag=True, help="the replaced and corrected ones too")
@click.option("--pin", "pin_id", type=int, default=None, metavar="ID", help="keep fact ID in the prompt (refused past the facts' share of the budget)")
@click.option("--unpin", "unpin_id", type=int, default=None, metavar="ID", help="let fact ID be chosen again")
@click.option("--edit", "edit", nargs=2, type=(str, str), default=None, metavar="N TEXT",
              help="replace fact N with TEXT: its old words are erased as forget erases them (with --user and no "
                   "CONV_ID: CONV:N)")
@click.option("--delete", "delete_ref", default=None, metavar="N",
              help="erase fact N: its source turn and every turn repeating its words, as forget erases them; the "
                   "turn's other facts stay (with --user and no CONV_ID: CONV:N)")
@click.option("--dry-run", is_flag=True, help="--edit, --delete: list what would be erased; change nothing")
@click.option("--json", "as_json", is_flag=True)
@user_option
@click.pass_context
def facts(ctx, conv_id, everything, pin_id, unpin_id, edit, delete_ref, dry_run, as_json):
    """The standing facts of CONV_ID: what its speakers said about themselves that stays true (allergies,
    schedules, people, preferences, ...), each with its source turn. The newest value of a fact stands; --edit or
    --delete one to change it. With --user and no CONV_ID: the facts of all of that user's
    conversations, each with its conversation, the newest value standing across them. No model loads (--pin
    loads its tokenizer: the pinned facts together must fit the facts' share of the memory budget, and a pin
    past it is refused; --edit too, to page the new words). Exits 1 if an erasure could not rewrite the store's
    files (another process was reading the store): run forget --finish once it has closed."""
    if sum(x is not None for x in (pin_id, unpin_id, edit, delete_ref)) > 1:
        raise click.UsageError("give one of --pin, --unpin, --edit or --delete")
    if dry_run and edit is None and delete_ref is None:
        raise click.UsageError("--dry-run goes with --edit or --delete")
    scope(ctx, conv_id, "list the facts of")
    if conv_id is None and (pin_id is not None or unpin_id is not None):
        raise click.UsageError("--pin and --unpin need the fact's CONV_ID")
    if edit is not None or delete_ref is not None:
        try:
            where, number = fact_ref(edit[0] if edit is not None else delete_ref, conv_id)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        if where is None:
            raise click.UsageError("with --user and no CONV_ID, name the fact as CONV:N (as `facts` lists it)")
        with friendly_errors():
            conv = open_conversation(ctx, where)
            done = (conv.edit_fact(number, edit[1], dry_run) if edit is not None
                    else conv.delete_fact(number, dry_run))
        if as_json:
            echo_json(done.to_dict())
        else:
            for line in done.lines():
                click.echo(line)
        if done.rewrite_pending:  # the old words are still on disk: not a success
            ctx.exit(1)
        return
    if conv_id is None:
        with friendly_errors():
            user = open_user(ctx)
            if as_json:
                by = user.replacements()
                echo_json([{**f.to_dict(), **({"superseded_in": by[(f.conv_id, f.fact_id)][0]}
                                              if (f.conv_id, f.fact_id) in by else {})}
                           for f in user.facts(all=everything)])
                return
            lines = user.fact_lines(all=everything)
        for line in lines:
            click.echo(line)
        if not lines:
            click.echo("(no standing facts)")
        return
    with friendly_errors():
        conv = open_conversation(ctx, conv_id)
        if pin_id is not None or unpin_id is not None:
            try:
                fact = conv.pin_fact(pin_id if pin_id is not None else unpin_id, pin_id is not None)
            except PinRefused as exc:
                raise click.ClickException(f"{exc}: localpager facts {shlex.quote(conv_id)} --unpin ID") from None
            except ValueError as exc:
                raise click.ClickException(str(exc)) from None
            click.echo(f"#{fact.fact_id} {'pinned' if fact.pinned else 'unpinned'}: {fact.text}")
            return
        found = conv.facts(all=everything)
    if as_json:
        echo_json([f.to_dict() for f in found])
        return
    for fact in found:
        click.echo(fact.line())
    if not found:
        click.echo("(no standing facts)")


COMMANDS = (conversations, pages, pin, bookmarks, log, budget, forget, search, correct, facts, remember)
