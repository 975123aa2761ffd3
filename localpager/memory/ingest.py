"""Ingest: a conversation file read, validated whole, paged and stored, each conversation in one transaction."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from ..core.facts import EXTRACT_WINDOW, extract_all
from ..core.pager import PagingConfig, page_conversation
from ..core.records import Transcript, Turn
from ..store.base import Origin, check_owners, check_user
from ..store.choices import FileFormat
from ..store.loaders import load_conversations
from ..store.locks import conversation_lock
from .models import Models
from .held import Held


@dataclass
class IngestReport:
    conversations: int = 0
    turns: int = 0
    pages: int = 0
    evicted: int = 0
    probes: int = 0
    ids: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # an export imported again (``history``): conversations stored before that got new turns, and how many
    # stored before had none (the turns of both are not in ``turns``'s count unless appended)
    continued: list[str] = field(default_factory=list)
    unchanged: int = 0


@dataclass(frozen=True)
class IngestOptions:
    """How a file is ingested (``LocalPager.ingest``'s arguments): its ``format``, the paging ``config``,
    ``replace`` (a conversation already stored is replaced, not refused), two hooks (``progress`` wraps the
    list of conversations, as ``tqdm`` does; ``on_turns(done, total)`` hears how many turns are paged), and
    ``embed``: the caller embeds the conversations next (``Conversation.prepare``), so each conversation's
    evicted turns are handed to the embedder as soon as it is paged (``TextEmbedder.encode_ahead``), to be
    encoded in a helper process while the next ones are paged. ``user``: whose the conversations are that the
    file names no user for (None: nobody's). ``on_conversations(stage, done, total)``: for a chat export
    (``history``), how many conversations are read (``read``: the check of the whole file) and stored (``store``)."""

    format: str = FileFormat.AUTO
    config: PagingConfig | None = None
    replace: bool = False
    progress: Callable | None = None
    on_turns: Callable[[int, int], None] | None = None
    embed: bool = False
    user: str | None = None
    on_conversations: Callable[[str, int, int], None] | None = None


def ingest_file(held: Held, path: str | os.PathLike, options: IngestOptions = IngestOptions()) -> IngestReport:
    """Store every conversation of a file (see ``LocalPager.ingest``); the models' tokenizer counts the tokens,
    and their assistant does the model strategies' side work."""
    store, models = held.store, held.models
    config, replace = options.config or PagingConfig(), options.replace
    progress, on_turns = options.progress, options.on_turns
    if options.user is not None:
        check_user(options.user)
    loaded = load_conversations(path, options.format)
    users = {c.id: loaded.users.get(c.id, options.user) for c in loaded.conversations}
    taken = [c.id for c in loaded.conversations if store.has_conversation(c.id)]
    if taken and not replace:
        raise ValueError(f"already in the store: {', '.join(taken)} (use --replace to overwrite them)")
    check_owners(store, [(conv_id, users[conv_id]) for conv_id in taken])
    counter = models.counter()
    report = IngestReport(warnings=list(loaded.warnings))
    total, paged = sum(len(c.turns) for c in loaded.conversations), 0
    conversations, ahead = loaded.conversations, 0
    for n, conv in enumerate(conversations if progress is None else progress(conversations)):
        if n >= ahead:
            ahead = _extract_ahead(conversations, n)
        turns = conv.turns if on_turns is None else _counted(conv.turns, paged, total, on_turns)
        store_transcript(held, conv, turns, str(path), config, counter, replace=replace, user=users[conv.id],
                         report=report, embed=options.embed)
        paged += len(conv.turns)
    return report


def _extract_ahead(conversations: Sequence[Transcript], start: int) -> int:
    """Read the standing facts of the conversations from ``start`` on (as many as hold one extraction window,
    ``facts.EXTRACT_WINDOW`` turns, one at least) all at once (``facts.extract_all``), so that the parses they need
    are made in batches of the whole file, not of each conversation; storing each conversation then finds its facts
    read (a window holds far fewer texts than the extractor keeps readings of, ``facts._extract``). The index after
    the last read."""
    end, turns = start, 0
    while end < len(conversations) and (end == start or turns + len(conversations[end].turns) <= EXTRACT_WINDOW):
        turns += len(conversations[end].turns)
        end += 1
    extract_all([t for conv in conversations[start:end] for t in conv.turns])
    return end


def store_transcript(held: Held, conv: Transcript, turns: Iterable[Turn], source: str, config: PagingConfig,
                     counter, *, replace: bool, user: str | None, report: IngestReport, embed: bool) -> None:
    """Page one read conversation (``turns``: its turns, perhaps counted for a bar as they are paged) and store it
    in one transaction, counted in ``report``; an export's import (``history``) stores its new ones this way too."""
    models = held.models
    pager = page_conversation(turns, counter, config)
    report.warnings += _too_long(conv.id, conv.turns, pager, models, config)
    if pager.pending_keywords() or pager.pending_worth():  # model strategies: one batch per conversation
        from ..runtime.assist import maintain

        maintain(pager, models.assistant)
    settings = {**config.to_dict(), "tokenizer": counter.name}
    # replacing a conversation another process is writing to waits for it, as every writer does
    with conversation_lock(held.store, conv.id, held.lock_timeout):
        held.store.save_conversation(conv.id, conv.turns, pager.pages, conv.probes, settings,
                                     Origin(source, conv.meta), replace=replace, user=user)
    report.conversations += 1
    report.turns += len(conv.turns)
    report.pages += len(pager.pages)
    report.evicted += len(pager.evicted)
    report.probes += len(conv.probes)
    report.ids.append(conv.id)
    if embed:
        _embed_ahead(models, pager)


def _embed_ahead(models: Models, pager) -> None:
    """Hand the texts ``prepare`` will embed (the evicted turns that have text) to the embedder ahead; an embedder
    that encodes nothing ahead (a test's) embeds them when asked, and a missing one is reported by ``prepare``, as
    it was before (every conversation is stored first)."""
    texts = [pager.turns[i].text for p in pager.evicted for i in p.turn_range if pager.turns[i].text]
    try:
        embedder = models.embedder
    except Exception:  # noqa: BLE001 - no embedder: prepare says so
        return
    if texts:
        embedder.encode_ahead(texts)


def _too_long(conv_id: str, turns: Sequence[Turn], pager, models: Models, config: PagingConfig) -> list[str]:
    """A warning for each turn longer than any prompt can hold whole (it is stored and searchable all the same)."""
    longest = models.n_ctx - models.recall.max_answer_tokens - 64  # a turn past this fits in no prompt whole
    warnings = []
    for turn in turns:
        if len(turn.render().encode()) + config.turn_overhead <= longest:  # a token is a byte or more
            continue
        size = pager.turn_tokens(turn)
        if size > longest:
            warnings.append(
                f"{conv_id}: turn {turn.index} is {size} tokens, longer than a {models.n_ctx}-token context "
                "can show: it is stored and searchable, but no prompt holds it whole (split it, or use a model "
                "with a larger context)")
    return warnings


def _counted(turns: Sequence[Turn], before: int, total: int, report, every: int = 500):
    """``turns`` one by one, calling ``report(before + n, total)`` every ``every`` turns and at the end."""
    n = 0
    for n, turn in enumerate(turns, start=1):
        yield turn
        if n % every == 0:
            report(before + n, total)
    report(before + n, total)
