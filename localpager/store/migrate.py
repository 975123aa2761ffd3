"""Copy conversations from one store into another (``localpager migrate-store SRC DST``): a SQLite file into
PostgreSQL, back, or between two of either. Everything a store holds of a conversation goes: its settings,
source and metadata, turns (forgotten ones stay blank, corrections stay marked), pages with their keywords,
pins, uses and evictions, probes, traces with their times, and vectors (so the target needs no embedder).
Each conversation is checked absent from the target first (unless ``replace``); one that fails half-way is
deleted from the target again, so a copy is whole or absent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

from .base import Origin, Store, StoreError


@dataclass
class MigrateReport:
    conversations: int = 0
    turns: int = 0
    vectors: int = 0
    traces: int = 0
    ids: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)


def migrate_store(source: Store, target: Store, conv_ids: Sequence[str] | None = None,
                  replace: bool = False) -> MigrateReport:
    """Copy ``conv_ids`` (default: all, in the source's order) from ``source`` into ``target``."""
    ids = list(conv_ids) if conv_ids else [c.id for c in source.list_conversations()]
    for conv_id in ids:
        source.settings(conv_id)  # an unknown id: the store's own not-found error, before any write
    taken = [i for i in ids if target.has_conversation(i)]
    if taken and not replace:
        raise StoreError(f"already in {target.path}: {', '.join(taken)} (use --replace to overwrite them)")
    report = MigrateReport(replaced=taken)
    for conv_id in ids:
        try:
            _copy(source, target, conv_id, report, replace=conv_id in taken)
        except BaseException:
            if conv_id not in taken and target.has_conversation(conv_id):
                target.delete_conversation(conv_id)
            raise
        report.conversations += 1
        report.ids.append(conv_id)
    if taken:  # what was replaced is erased from the target's files, as a forget is
        target.erase()
    return report


def _copy(source: Store, target: Store, conv_id: str, report: MigrateReport, replace: bool) -> None:
    record = source.conversation_record(conv_id)
    turns = source.turns(conv_id)
    pages = source.pages(conv_id, turns)
    target.save_conversation(conv_id, turns, pages, source.probes(conv_id), record["settings"],
                             Origin(record["source"], record["meta"]), replace=replace, user=record["user"])
    vectors = source.conversation_embeddings(conv_id)
    if vectors:
        target.save_embeddings([(conv_id, *row) for row in vectors])
    traces = source._query("SELECT turn_idx, created_at, data FROM traces WHERE conv_id = ? ORDER BY id", (conv_id,))
    if traces:
        with target.transaction() as conn:
            conn.executemany("INSERT INTO traces (conv_id, turn_idx, created_at, data) VALUES (?, ?, ?, ?)",
                             [(conv_id, r[0], r[1] if r[1] is not None else time.time(), r[2]) for r in traces])
    report.turns += len(turns)
    report.vectors += len(vectors)
    report.traces += len(traces)
