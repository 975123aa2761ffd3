"""Asking: ``ask`` (one question) and ``chat`` (a prompt loop with its slash commands), both answered by
``Conversation.ask`` with the recall settings of their options."""

from __future__ import annotations

import re

import click

from ..runtime.choices import DEFAULT_LAYOUT, OFFERED_RECALL_MODES, Layout, RecallMode
from ..runtime.trace import citation_lines
from ..store.base import PinRefused
from .options import ChoiceOf, user_option
from .output import Bars, echo_json, page_line, prepare_recall
from .session import friendly_errors, open_pager, user_name

LAYOUT_HELP = ("how a recall is answered: focused (the recalled turns and the question in a prompt of their own), "
               "focused+recent (plus the last exchange), notes-system, inline (after the question in the chat's prompt)")


def model_options(f):
    """The options ``ask`` and ``chat`` share: the model, the budget and how a recall is answered."""
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


def answering_pager(ctx, model, budget, save, recall_mode, n_ctx, layout, create=False):
    """The LocalPager that answers with the options of ``model_options``."""
    from ..runtime.settings import RecallSettings

    if save and budget is None:
        raise click.UsageError("--save stores --budget: give --budget N")
    return open_pager(ctx, model, create=create, n_ctx=n_ctx, recall=RecallSettings(mode=recall_mode, layout=layout))


def open_chat(ctx, conv_id, model, budget, save, recall_mode, n_ctx, layout):
    """The conversation ``chat`` talks in, created if new (with ``--user``, as that user's)."""
    return answering_pager(ctx, model, budget, save, recall_mode, n_ctx, layout, create=True).conversation(
        conv_id, create=True, user=user_name(ctx))


@click.command()
@click.argument("conv_id")
@click.argument("question", required=False)
@click.option("--probe", type=int, default=None, help="ask the conversation's stored probe number N instead")
@model_options
@click.option("--json", "as_json", is_flag=True, help="print the answer with its trace as JSON")
@user_option
@click.pass_context
def ask(ctx, conv_id, question, probe, model, budget, save, recall_mode, n_ctx, layout, as_json):
    """Ask QUESTION in conversation CONV_ID; the question and answer are stored as turns.

    With --user, a CONV_ID that does not exist yet is a new conversation of that user's (a new chat, which
    knows what they said in their others). --budget N pages the conversation under N tokens for this question
    only; with --save it becomes the conversation's budget (stored once the answer is)."""
    if (question is None) == (probe is None):
        raise click.UsageError("give a QUESTION or --probe N")
    with friendly_errors():
        user = user_name(ctx)
        lp = answering_pager(ctx, model, budget, save, recall_mode, n_ctx, layout, create=user is not None)
        conv = lp.conversation(conv_id, create=user is not None and probe is None, user=user)
        if probe is not None:
            question = stored_probe(lp, conv_id, probe)
        if recall_mode != RecallMode.NEVER and not lp.store.read_only:  # read-only: ask says so, loading nothing
            lp.preload()  # the chat model loads while the memory a recall needs is read
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


def stored_probe(lp, conv_id: str, number: int) -> str:
    """The question of the conversation's stored probe ``number`` (generated and LoCoMo files carry probes)."""
    probes = lp.store.probes(conv_id)
    if not 0 <= number < len(probes):
        raise click.ClickException(f"conversation {conv_id!r} has {len(probes)} probes; no probe {number}")
    return probes[number].question


# -- chat ----------------------------------------------------------------------------------------------------
CHAT_COMMANDS = ("/bookmarks", "/pages", "/trace", "/facts", "/remember", "/correct", "/search", "/forget", "/pin",
                 "/unpin", "/export", "/quit")
VIEW_COMMANDS = ("/bookmarks", "/pages", "/trace")
MEMORY_COMMANDS = ("/facts", "/remember", "/correct", "/search", "/forget", "/pin", "/unpin", "/export")
CHAT_HELP = """/bookmarks          evicted pages as the model sees them
/pages              every page
/trace              what the pager did on the last turn
/facts [all]        what you told me about yourself that stays true (all: the replaced ones too; a user's chat:
                    the facts of all their conversations, CONV #N)
/facts pin N, /facts unpin N   keep standing fact N in the prompt (or not); the pins must fit the facts' room
/remember TEXT      keep TEXT as a fact about you, without a reply
/correct N TEXT     replace fact N (or CONV:N) with TEXT; its old words are erased (asks first)
/search WORDS       what is remembered about WORDS
/forget turn N | page N | fact N | TEXT   forget a turn, a page, a fact (CONV:N too), or every turn containing
                    TEXT (asks first)
/pin N, /unpin N    keep page N in the prompt (or not)
/export FILE        write this conversation to a JSONL file
/quit"""


@click.command()
@click.argument("conv_id", required=False, default="chat")
@model_options
@user_option
@click.pass_context
def chat(ctx, conv_id, model, budget, save, recall_mode, n_ctx, layout):
    """Chat in conversation CONV_ID (created if new); /help lists /facts, /search, /forget, /pin, /export and more.

    --budget N pages the conversation under N tokens for this session only; with --save it becomes the
    conversation's budget."""
    with friendly_errors():
        conv = open_chat(ctx, conv_id, model, budget, save, recall_mode, n_ctx, layout)
        if budget is not None and (save or budget != conv.budget):
            conv.set_budget(budget, save=save)
    click.echo(f"conversation {conv_id}: {len(conv.turns)} turns, {len(conv.pages)} pages. /help for commands.")
    if recall_mode != RecallMode.NEVER:  # the models, vectors and indexes load while the user types
        conv.warm_up(models=True)
    last = None
    while (line := read_line()) is not None:
        if line in ("/quit", "/exit"):
            return
        if line:
            last = chat_line(conv, line, last)


def read_line() -> str | None:
    """The next line the user types, stripped; None at the end of input (Ctrl-D)."""
    try:
        return click.prompt("you", prompt_suffix="> ", default="", show_default=False).strip()
    except (EOFError, click.Abort):
        click.echo()
        return None


def chat_line(conv, line: str, last):
    """What one line typed in a chat does: a slash command, or a message the model answers. Returns the last
    answer (for ``/trace``)."""
    command = line.split()[0]
    if line == "/help":
        click.echo(CHAT_HELP)
    elif command in MEMORY_COMMANDS:
        try:
            with friendly_errors():
                chat_memory_command(conv, line)
        except click.ClickException as exc:
            click.echo(f"error: {exc.message}", err=True)
    elif line in VIEW_COMMANDS:
        show_view(conv, line, last)
    elif line.startswith("/"):
        click.echo(f"unknown command {command}; commands: {' '.join(CHAT_COMMANDS)} (/help)")
    else:
        answer = answer_line(conv, line)
        return last if answer is None else answer
    return last


def show_view(conv, command: str, last) -> None:
    """/bookmarks, /pages and /trace: what the model sees, every page, what the pager did last."""
    from ..runtime.trace import format_trace

    if command == "/bookmarks":
        evicted = [b for p, b in zip(conv.pages, conv.bookmarks()) if p.evicted]
        for bookmark in evicted:
            click.echo(bookmark)
        if not evicted:
            click.echo("(no page evicted yet)")
    elif command == "/pages":
        for p in conv.pages:
            click.echo(page_line(p))
    else:
        click.echo(format_trace(last.to_dict()) if last else "no turn yet")


def answer_line(conv, line: str):
    """The model's answer to a chat message, streamed as it comes with its citations after it; None (and the
    error said) when it failed: the chat goes on."""
    click.echo("bot> ", nl=False)
    try:
        with friendly_errors():
            answer = conv.ask(line, on_text=lambda piece: click.echo(piece, nl=False))
    except click.ClickException as exc:  # say what went wrong and keep chatting
        click.echo(f"\nerror: {exc.message}", err=True)
        return None
    click.echo()
    for cited in citation_lines(answer.to_dict()["citations"]):
        click.echo(f"  ({cited})")
    return answer


def chat_memory_command(conv, line: str) -> None:
    """/facts, /search, /forget, /pin, /unpin and /export in a chat: what the commands of the same name do."""
    command, _, rest = line.partition(" ")
    rest = rest.strip()
    if command == "/facts":
        chat_facts(conv, rest)
    elif command == "/remember":
        if not rest:
            raise click.ClickException("/remember TEXT")
        for fact in conv.remember(rest):
            click.echo(f"remembered: {fact.line()}")
    elif command == "/correct":
        ref, _, text = rest.partition(" ")
        if not ref or not text.strip():
            raise click.ClickException("/correct N TEXT (N: a standing fact's number, as /facts lists it)")
        chat_change_fact(conv, ref, text.strip())
    elif command == "/search":
        chat_search(conv, rest)
    elif command == "/forget":
        chat_forget(conv, rest)
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


def chat_facts(conv, rest: str) -> None:
    """/facts [all], /facts pin N, /facts unpin N."""
    action, _, number = rest.partition(" ")
    if action in ("pin", "unpin"):
        if not number.strip().lstrip("#").isdigit():
            raise click.ClickException(f"/facts {action} N (a standing fact's number)")
        try:
            fact = conv.pin_fact(int(number.strip().lstrip("#")), action == "pin")
        except PinRefused as exc:
            raise click.ClickException(f"{exc}: /facts unpin N") from None
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(f"#{fact.fact_id} {'pinned' if fact.pinned else 'unpinned'}: {fact.text}")
        return
    if rest not in ("", "all"):
        raise click.ClickException("/facts [all] | /facts pin N | /facts unpin N")
    if conv.user is not None:  # a user's chat answers from all their facts: those are what they see
        from ..memory.users import User

        found = User(conv.held, conv.user).facts(all=rest == "all")
    else:
        found = conv.facts(all=rest == "all")
    for fact in found:
        click.echo(fact.line())
    if not found:
        click.echo("(no standing facts yet)")


def chat_search(conv, words: str) -> None:
    if not words:
        raise click.ClickException("/search WORDS")
    hits = conv.search(words, limit=5)
    for h in hits:
        click.echo(h.line())
    if not hits:
        click.echo("(nothing remembered)")


def chat_change_fact(conv, ref: str, text: str | None) -> None:
    """/correct N TEXT (``text``) and /forget fact N (None): fact N of this conversation, or CONV:N of another of
    its user's; shows what would be erased, and asks."""
    from .memory import fact_ref

    try:
        where, number = fact_ref(ref, None)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    if where is not None and where != conv.id:  # another conversation of this chat's user
        if conv.user is None:
            raise click.ClickException(f"fact {ref}: this conversation has no user; its facts are N, as /facts lists")
        from ..memory.users import User

        user = User(conv.held, conv.user)  # one of theirs, or one line naming whose it is

        def change(dry: bool):
            return (user.edit_fact((where, number), text, dry) if text is not None
                    else user.delete_fact((where, number), dry))
    else:
        def change(dry: bool):
            return conv.edit_fact(number, text, dry) if text is not None else conv.delete_fact(number, dry)

    for line in change(True).lines():
        click.echo(line)
    if click.confirm("erase these for good?", default=False):
        done = change(False)
        for line in done.lines()[:1] + [line for line in done.lines() if line.startswith("  now: ")]:
            click.echo(line)
        if done.rewrite_pending:
            click.echo("warning: the store's files still hold the old words: another process is reading the store; "
                       "once it has closed, run: localpager forget --finish", err=True)


def chat_forget(conv, what: str) -> None:
    """/forget turn N | page N | fact N | TEXT: shows what would go, and asks."""
    kind, _, value = what.partition(" ")
    if kind == "fact" and re.fullmatch(r"(?:.+:)?#?\d+", value.strip()):
        chat_change_fact(conv, value.strip(), None)
        return
    if kind in ("turn", "page") and value.strip().isdigit():
        target = {kind: int(value)}
    elif what:
        target = {"match": what}
    else:
        raise click.ClickException("/forget turn N | page N | fact N | TEXT")
    preview = conv.forget(**target, dry_run=True)
    if not preview.turns:
        click.echo("nothing to forget")
        return
    for text in preview.lines():
        click.echo(text)
    if click.confirm("forget these for good?", default=False):
        for text in conv.forget(**target).summary():
            click.echo(text)


COMMANDS = (ask, chat)
