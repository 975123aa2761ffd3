"""Export and import: a conversation, or a whole store, as JSONL and back.

Each line is the interchange format ``loaders.py`` reads (``id``, ``turns``, ``probes``, ``meta``), so
``localpager ingest`` reads an export too (as new conversations, paged afresh), plus a ``localpager``
object with what the store knows beyond the turns: settings, pages (keywords, pins, evicted, use
counts), superseded marks, forgotten turns and, on request, the vectors. Importing that restores the
conversation as it was: the same pages, bookmarks and search results.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from .loaders import ConversationFileError, _conversation_from_json, _conversation_to_json, _read_text, _Where
from .records import Page, Transcript, Turn

if TYPE_CHECKING:
    from .api import LocalPager
    from .store import Store

FORMAT_VERSION = 1
FORGOTTEN_TEXT = "[forgotten]"  # what a forgotten turn reads as in ``turns`` (the loader wants some text)
MODES = ("error", "replace", "merge")
_PAGE_FIELDS = ("page_id", "first_turn", "last_turn", "token_count", "keywords", "access_count", "last_access",
                "pinned", "evicted", "keywords_by", "worth")


@dataclass
class ImportReport:
    conversations: int = 0
    turns: int = 0  # turns written (merge: turns appended)
    replaced: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. a replace that brings forgotten text back

    def to_dict(self) -> dict:
        return asdict(self)


# -- export -----------------------------------------------------------------------------------------
def conversation_line(store: Store, conv_id: str, vectors: bool = False) -> dict[str, Any]:
    """One conversation as an export line."""
    record = store.conversation_record(conv_id)
    turns = store.turns(conv_id)
    base = Transcript(conv_id, [Turn(t.role, t.text or FORGOTTEN_TEXT, t.index, t.time, t.speaker) for t in turns],
                        store.probes(conv_id), meta=record["meta"])
    line = _conversation_to_json(base)
    state: dict[str, Any] = {
        "version": FORMAT_VERSION,
        "source": record["source"],
        "created_at": record["created_at"],
        "settings": record["settings"],
        "pages": [{k: getattr(p, k) for k in _PAGE_FIELDS} for p in store.pages(conv_id, turns)],
        "superseded": {str(t.index): t.superseded_by for t in turns if t.superseded_by is not None},
        "forgotten": [t.index for t in turns if not t.text],
    }
    if vectors:
        state["vectors"] = [
            {"page_id": page_id, "kind": kind, "model": model, "source": source,
             "vector": base64.b64encode(blob).decode("ascii")}
            for page_id, kind, model, source, blob in store.conversation_embeddings(conv_id)
        ]
    line["localpager"] = state
    return line


def export_conversations(store: Store, path: str | os.PathLike, conv_ids: Sequence[str] | None = None,
                         vectors: bool = False) -> int:
    """Write ``conv_ids`` (default: every conversation) to ``path``, readable by its owner only."""
    from .index import private_file

    ids = list(conv_ids) if conv_ids else [c.id for c in store.list_conversations()]
    lines = [json.dumps(conversation_line(store, cid, vectors), ensure_ascii=False) for cid in ids]
    target = Path(path)
    private_file(target)  # conversations are private: the file never exists readable by others
    target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return len(lines)


# -- import -----------------------------------------------------------------------------------------
@dataclass
class _Entry:
    conversation: Transcript
    state: dict[str, Any]


def read_export(path: str | os.PathLike) -> list[_Entry]:
    """Every line of an export (or of a plain interchange file), checked before anything is stored."""
    text = _read_text(path)
    entries, seen = [], set()
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        where = _Where(str(path), line=number)
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as e:
            raise where.error(None, f"invalid JSON: {e.msg} (column {e.colno})") from None
        state = obj.get("localpager", {}) if isinstance(obj, dict) else {}
        if not isinstance(state, dict):
            raise where.error("localpager", "must be an object")
        if isinstance(obj, dict) and obj.get("turns") == []:  # an empty conversation (a chat never used)
            conv = Transcript(str(obj.get("id", "")), [], meta=dict(obj.get("meta") or {}))
            if not conv.id:
                raise where.error("id", "missing")
        else:
            conv = _conversation_from_json(obj, where, str(path))
        if conv.id in seen:
            raise where.error("id", f"duplicate conversation id {conv.id!r}")
        seen.add(conv.id)
        forgotten = set(state.get("forgotten", []))
        superseded = {int(k): int(v) for k, v in state.get("superseded", {}).items()}
        for t in conv.turns:
            if t.index in forgotten:
                t.text = ""
            t.superseded_by = superseded.get(t.index)
        entries.append(_Entry(conv, state))
    return entries


def _pages(state: dict[str, Any]) -> list[Page] | None:
    rows = state.get("pages")
    if rows is None:
        return None
    return [Page(**{k: row[k] for k in _PAGE_FIELDS if k in row}) for row in rows]


def import_conversations(lp: LocalPager, path: str | os.PathLike, mode: str = "error") -> ImportReport:
    """Store every conversation of an export (see ``LocalPager.import_file``)."""
    from .memory import _after_erase

    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    entries = read_export(path)
    store = lp.store
    taken = [e.conversation.id for e in entries if store.has_conversation(e.conversation.id)]
    if taken and mode == "error":
        raise ValueError(f"already in the store: {', '.join(taken)} (use --replace or --merge)")
    report = ImportReport()
    with lp.lock:
        for entry in entries:  # merges are checked before anything is written
            if entry.conversation.id in taken and mode == "merge":
                _check_merge(lp, entry)
        for entry in entries:
            conv = entry.conversation
            if conv.id in taken and mode == "merge":
                report.turns += _merge(lp, entry)
                report.merged.append(conv.id)
            else:
                if conv.id in taken:
                    report.notes += _unforgetting(lp, entry)
                _restore(lp, entry, replace=conv.id in taken)
                report.turns += len(conv.turns)
                if conv.id in taken:
                    report.replaced.append(conv.id)
            report.conversations += 1
            report.ids.append(conv.id)
        if report.replaced:  # what was replaced is erased from the files, as a forget is
            store.erase()
        _after_erase(lp, report.ids)
        for conv_id in report.ids:
            lp._lexical.pop(conv_id, None)
    return report


def _restore(lp: LocalPager, entry: _Entry, replace: bool) -> None:
    """Store an exported conversation as it was; one without store state (a plain interchange line) is
    paged afresh, as ``ingest`` would."""
    conv, state = entry.conversation, entry.state
    pages = _pages(state)
    settings = state.get("settings")
    if pages is None:
        from .pager import PagingConfig, page_conversation

        config = PagingConfig.from_dict(settings or {})
        counter = lp.counter()
        pages = page_conversation(conv.turns, counter, config).pages
        settings = {**config.to_dict(), "tokenizer": counter.name}
    lp.store.save_conversation(conv.id, conv.turns, pages, conv.probes, settings or {},
                               source=state.get("source"), meta=conv.meta, replace=replace)
    marks = {t.index: t.superseded_by for t in conv.turns if t.superseded_by is not None}
    if marks:
        lp.store.set_superseded(conv.id, marks)
    if state.get("vectors"):
        lp.store.save_embeddings([
            (conv.id, v["page_id"], v["kind"], v["model"], v["source"], base64.b64decode(v["vector"]))
            for v in state["vectors"]
        ])


def _unforgetting(lp: LocalPager, entry: _Entry) -> list[str]:
    """A one-line note when replacing brings back text the store had forgotten (an export written before
    the forget still holds it): the user asked to forget it, so say so rather than restore it silently."""
    stored = lp.store.turns(entry.conversation.id)
    back = [t.index for t in entry.conversation.turns if t.text and t.index < len(stored) and not stored[t.index].text]
    if not back:
        return []
    shown = ", ".join(map(str, back[:10])) + (", ..." if len(back) > 10 else "")
    return [f"note: {entry.conversation.id}: this brings back {len(back)} turns that were forgotten (turns {shown}); "
            "forget them again if that is not what you meant"]


def _check_merge(lp: LocalPager, entry: _Entry) -> None:
    """A merge only extends: the stored turns must be the file's first turns (a forgotten turn on either
    side matches anything)."""
    stored, incoming = lp.store.turns(entry.conversation.id), entry.conversation.turns
    for a, b in zip(stored, incoming):
        if a.role != b.role or (a.text and b.text and a.text != b.text):
            raise ValueError(f"{entry.conversation.id}: the store and the file differ at turn {a.index}; "
                             "use --replace to take the file's")


def _merge(lp: LocalPager, entry: _Entry) -> int:
    """Append the file's turns the store lacks (paged as new turns are), then its superseded marks and
    pins on pages that cover the same turns. Nothing stored is deleted or rewritten."""
    conv_id, incoming = entry.conversation.id, entry.conversation.turns
    chat = lp.conversation(conv_id)
    added = 0
    for t in incoming[len(chat.turns):]:
        if t.text:
            chat.add_turn(t.role, t.text, t.time, t.speaker)
        else:  # forgotten in the file: keep its place, without text
            chat.add_turn(t.role, FORGOTTEN_TEXT, t.time, t.speaker)
            chat.forget(turn=t.index)
        added += 1
    chat.reload()
    for t in incoming:
        if t.superseded_by is not None and chat.turns[t.index].superseded_by is None and chat.turns[t.index].text:
            chat.supersede(t.index, t.superseded_by)
    by_range = {(p.first_turn, p.last_turn): p for p in chat.pages}
    pinned = [by_range[(p.first_turn, p.last_turn)] for p in _pages(entry.state) or []
              if p.pinned and (p.first_turn, p.last_turn) in by_range]
    for page in pinned:
        chat.pin(page.page_id)
    return added


__all__ = ["ImportReport", "conversation_line", "export_conversations", "import_conversations", "read_export",
           "ConversationFileError"]
