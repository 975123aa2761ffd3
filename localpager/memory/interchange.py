"""Export and import: a conversation, or a whole store, as JSONL and back.

Each line is the interchange format ``loaders.py`` reads (``id``, ``turns``, ``probes``, ``meta``), so
``localpager ingest`` reads an export too (as new conversations, paged afresh), plus a ``localpager``
object with what the store knows beyond the turns: settings, pages (keywords, pins, evicted, use
counts), superseded marks, forgotten turns and, on request, the vectors. Importing that restores the
conversation as it was: the same pages, bookmarks and search results.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import typing
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Callable, Sequence

from ..core.choices import choose
from ..core.records import Page, Transcript, Turn
from ..store.loaders import (
    TOP_KEYS,
    ConversationFileError,
    Where,
    checked_conversation_id,
    checked_turn_index,
    conversation_from_json,
    conversation_to_json,
    conversation_user,
    is_number,
    json_line,
    list_of,
    no_unknown_keys,
    object_of,
    optional_string,
    read_text,
    required_field,
    required_string,
    show_value,
    storable_text,
)
from ..store.base import Origin, PinRefused, Store, check_owners, check_user
from .choices import ImportMode
from .held import Held


FORMAT_VERSION = 1
Progress = typing.Callable[[str, int, int], None]  # (stage, done, total), e.g. a tqdm bar per stage
FORGOTTEN_TEXT = "[forgotten]"  # what a forgotten turn reads as in ``turns`` (the loader wants some text)
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
    line = conversation_to_json(base)
    if record["user"] is not None:  # whose it is, after its id
        line = {"id": line.pop("id"), "user": record["user"], **line}
    state: dict[str, Any] = {
        "version": FORMAT_VERSION,
        "source": record["source"],
        "created_at": record["created_at"],
        "settings": record["settings"],
        "pages": [{k: getattr(p, k) for k in _PAGE_FIELDS} for p in store.pages(conv_id, turns)],
        "superseded": {str(t.index): t.superseded_by for t in turns if t.superseded_by is not None},
        "forgotten": [t.index for t in turns if not t.text],
        "remembered": [t.index for t in turns if t.remembered],  # kept as facts at the user's word (remember)
        # the standing facts, as the store has them (made again from the turns on import; their pins kept)
        "facts": [{k: v for k, v in asdict(f).items() if k in _FACT_KEYS} for f in store.facts(conv_id)],
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
    from ..retrieval.index import private_file

    ids = list(conv_ids) if conv_ids else [c.id for c in store.list_conversations()]
    lines = [json.dumps(conversation_line(store, cid, vectors), ensure_ascii=False) for cid in ids]
    target = Path(path)
    private_file(target)  # conversations are private: the file never exists readable by others
    target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return len(lines)


# -- import -----------------------------------------------------------------------------------------
@dataclass
class Entry:
    conversation: Transcript
    state: dict[str, Any]
    user: str | None = None  # the user the line says it belongs to


@dataclass
class VectorFit:
    """What the vectors of an import must be to be stored here. FAISS keeps every conversation's vectors of
    a signal in one index, so a vector of another width would break search in every conversation: each must
    have ``width`` numbers (this store's embedder's, when known without loading it; else the width of the
    vectors the store has; else that of the file's first vector), be finite and of unit length (the
    embedder's are normalised). Vectors of another model than this store's embedder (when its name is
    known) are not stored: they would rank against questions embedded by another model; they are computed
    again when needed (``dropped`` counts them). Worked out from ``held`` at the first vector."""

    held: Held | None = None
    model: str | None = None
    width: int | None = None
    source: str = ""  # where ``width`` comes from, for the message
    dropped: dict[str, int] = field(default_factory=dict)

    def _resolve(self) -> None:
        from ..core.modelpaths import ModelNotFoundError

        held, self.held = self.held, None
        try:
            embedder = held.models.embedder
        except ModelNotFoundError:  # an import that brings its vectors needs no embedder: the store decides
            embedder = None
        self.model = embedder.name if embedder is not None else None
        dim = embedder.known_dim if embedder is not None else None
        if type(dim) is int and dim > 0:
            self.width, self.source = dim, f"this store's embedder ({self.model}) makes"
            return
        widths = held.store.embedding_widths()
        mine = widths.get(self.model, {}) if self.model else {}
        counts: dict[int, int] = {}
        for by_width in ([mine] if mine else widths.values()):
            for width, n in by_width.items():
                counts[width] = counts.get(width, 0) + n
        if counts:
            self.width = max(counts, key=lambda w: counts[w])
            self.source = f"the vectors in this store ({self.model or 'every model'}) hold"

    def keeps(self, model: str, blob: bytes, where: Where, name: str) -> bool:
        """Whether the vector is stored (False: another model's, dropped); a vector that would break the index
        is refused with one line naming the field."""
        if self.held is not None:
            self._resolve()
        if self.model is not None and model != self.model:
            self.dropped[model] = self.dropped.get(model, 0) + 1
            return False
        numbers = len(blob) // 4
        if self.width is None:
            self.width, self.source = numbers, "the file's first vector holds"
        if numbers != self.width:
            raise where.error(name, f"holds {numbers} numbers; {self.source} {self.width}")
        import numpy as np

        vector = np.frombuffer(blob, dtype=np.float32)
        if not np.isfinite(vector).all():
            raise where.error(name, "holds a number that is not finite (NaN or infinity)")
        length = float(np.linalg.norm(vector.astype(np.float64)))
        if abs(length - 1.0) > 1e-3:
            raise where.error(name, f"must be a unit vector (this store's vectors are normalised), its length is "
                                    f"{length:.4g}")
        return True

    def notes(self) -> list[str]:
        return [f"note: {n} vectors of model {model} were not imported: this store embeds with {self.model}; "
                "they are computed again when needed" for model, n in sorted(self.dropped.items())]


def read_export(path: str | os.PathLike, progress: Progress | None = None,
                fit: VectorFit | None = None) -> list[Entry]:
    """Every line of an export (or of a plain interchange file), checked before anything is stored;
    ``progress("read", lines done, lines)`` after each line. ``fit``: what vectors must be to be stored in
    the store they are read for (none: only checked against each other)."""
    text = read_text(path)
    entries, seen = [], set()
    lines = text.split("\n")
    for number, raw in enumerate(lines, start=1):
        if progress is not None:
            progress("read", number, len(lines))
        if not raw.strip():
            continue
        where = Where(str(path), line=number)
        obj = json_line(raw, where)
        if isinstance(obj, dict) and obj.get("turns") == []:  # an empty conversation (a chat never used)
            conv = _empty_conversation(obj, where)
        else:
            conv = conversation_from_json(obj, where, str(path))
        if conv.id in seen:
            raise where.error("id", f"duplicate conversation id {conv.id!r}")
        seen.add(conv.id)
        # which turns are remembered, corrected or forgotten was read with them (``loaders.turn_marks``)
        state = _checked_state(obj.get("localpager", {}), where, len(conv.turns), fit)
        entries.append(Entry(conv, state, conversation_user(obj, where)))
    return entries


def _empty_conversation(obj: dict[str, Any], where: Where) -> Transcript:
    """A conversation without turns (a chat never used), which only an export holds."""
    no_unknown_keys(obj, TOP_KEYS, where, "", hint="put extra data under 'meta'")
    conv_id = checked_conversation_id(required_string(obj, "id", where), where, "id")
    if list_of(obj.get("probes", []), where, "probes"):
        raise where.error("probes", "a conversation without turns has no probes")
    return Transcript(conv_id, [], meta=dict(object_of(obj.get("meta", {}), where, "meta", "an object")))


# -- checking what an export adds: every field typed, so that nothing stored fails later ---------------
_STATE_KEYS = {"version", "source", "created_at", "settings", "pages", "superseded", "forgotten", "remembered", "vectors",
               "facts"}
_FACT_KEYS = {"fact_id", "turn", "kind", "subject", "text", "superseded_by", "pinned", "asked"}
_VECTOR_KEYS = {"page_id", "kind", "model", "source", "vector"}
_PAGE_TYPES: dict[str, Any] = {"page_id": int, "first_turn": int, "last_turn": int, "token_count": int, "keywords": list,
                               "access_count": int, "last_access": int, "pinned": bool, "evicted": bool,
                               "keywords_by": str, "worth": bool | None}
_PAGE_MINIMUM = {"token_count": 0, "access_count": 0, "last_access": -1}


def _checked_state(value: Any, where: Where, n_turns: int, fit: VectorFit | None = None) -> dict[str, Any]:
    """The ``localpager`` object of a line, checked as strictly as its turns: each field of its type, pages
    that tile the turns, turn indices in range, vectors that decode. Pages that overlapped were stored and
    made every later ``ask`` fail with an IndexError. A plain interchange line has none (all empty)."""
    state = object_of(value, where, "localpager", "an object")
    no_unknown_keys(state, _STATE_KEYS, where, "localpager.")
    _check_version(state.get("version", FORMAT_VERSION), where)
    created = state.get("created_at")
    if created is not None and not is_number(created):
        raise where.error("localpager.created_at", f"must be a number or null, got {show_value(created)}")
    pages = _checked_pages(state.get("pages"), where, n_turns)
    forgotten = {checked_turn_index(t, n_turns, where, f"localpager.forgotten[{i}]")
                 for i, t in enumerate(list_of(state.get("forgotten", []), where, "localpager.forgotten"))}
    return {"source": optional_string(state.get("source"), where, "localpager.source"), "created_at": created,
            "settings": _checked_settings(state.get("settings"), where), "pages": pages, "forgotten": forgotten,
            "vectors": _checked_vectors(state.get("vectors", []), where, pages or [], forgotten, fit),
            "pinned_facts": _checked_pinned_facts(state.get("facts", []), where, n_turns)}


def _checked_pinned_facts(value: Any, where: Where, n_turns: int) -> set[tuple[int, str]]:
    """(turn, text) of the exported standing facts that were pinned. The facts themselves are made again from
    the turns on import, as the store makes them (a file cannot bring a "fact" no turn states): only a pin, kept
    on the fact of the same turn and words, comes from the file."""
    pinned = set()
    for i, row in enumerate(list_of(value, where, "localpager.facts")):
        name = f"localpager.facts[{i}]"
        object_of(row, where, name, "a standing fact object")
        no_unknown_keys(row, _FACT_KEYS, where, f"{name}.")
        if _typed(row.get("pinned", False), bool, where, f"{name}.pinned"):
            turn = checked_turn_index(required_field(row, "turn", where, f"{name}.turn"), n_turns, where, f"{name}.turn")
            pinned.add((turn, required_string(row, "text", where, name)))
    return pinned


def _check_version(version: Any, where: Where) -> None:
    if type(version) is not int or version < 1:
        raise where.error("localpager.version", f"must be {FORMAT_VERSION}, got {show_value(version)}")
    if version > FORMAT_VERSION:
        raise where.error("localpager.version", f"written by a newer localpager (format {version}); "
                                                f"this one reads format {FORMAT_VERSION}")


def _typed(value: Any, kind: Any, where: Where, name: str) -> Any:
    """``value`` if it is of ``kind``: ``bool``, ``int``, ``float`` (an int counts), ``str`` or a ``StrEnum`` (a
    string), ``list`` (of strings, checked item by item by the caller) or ``bool | None``."""
    if kind == bool | None:
        ok, expected = value is None or isinstance(value, bool), "true, false or null"
    elif kind is bool:
        ok, expected = isinstance(value, bool), "true or false"
    elif kind is int:
        ok, expected = isinstance(value, int) and not isinstance(value, bool), "an integer"
        if ok and not -(2**63) <= value < 2**63:  # what SQLite holds: a larger one failed mid-import
            raise where.error(name, f"must fit in 64 bits, got {show_value(value)}")
    elif kind is float:
        ok, expected = is_number(value), "a number"
    elif kind is str or (isinstance(kind, type) and issubclass(kind, StrEnum)):  # a choice: PagingConfig checks it
        ok, expected = isinstance(value, str), "a string"
    elif kind is list:
        ok, expected = isinstance(value, list), "a list of strings"
    else:  # a type a later PagingConfig may use
        ok, expected = isinstance(value, kind), f"of type {kind}"
    if not ok:
        raise where.error(name, f"must be {expected}, got {show_value(value)}")
    return storable_text(value, where, name) if isinstance(value, str) else value


def _checked_settings(value: Any, where: Where) -> dict[str, Any] | None:
    """Paging settings as ``PagingConfig`` reads them: each of its fields of its type and a value it accepts,
    ``tokenizer`` a name or null (a name it does not know is ignored, as the store ignores it)."""
    from ..core.pager import PagingConfig

    if value is None:
        return None
    settings = object_of(value, where, "localpager.settings", "an object")
    for name, kind in typing.get_type_hints(PagingConfig).items():
        if name in settings:
            _typed(settings[name], kind, where, f"localpager.settings.{name}")
    optional_string(settings.get("tokenizer"), where, "localpager.settings.tokenizer")
    try:
        PagingConfig.from_dict(settings)
    except ValueError as exc:
        raise where.error("localpager.settings", str(exc)) from None
    return dict(settings)


def _checked_pages(value: Any, where: Where, n_turns: int) -> list[Page] | None:
    """The pages, numbered 1, 2, 3, ... and tiling the turns: the first starts at turn 0, each next one after
    the one before ends, the last ends at the last turn. None: the line has no pages (paged afresh)."""
    if value is None:
        return None
    rows = list_of(value, where, "localpager.pages")
    if not n_turns:
        if rows:
            raise where.error("localpager.pages", "an empty conversation has no pages")
        return []
    pages = [_checked_page(row, where, f"localpager.pages[{i}]") for i, row in enumerate(rows)]
    cover = f"pages must cover turns 0-{n_turns - 1} in order, each once"
    after = 0
    for i, page in enumerate(pages):
        name = f"localpager.pages[{i}]"
        if page.page_id != i + 1:
            raise where.error(f"{name}.page_id", f"must be {i + 1} (pages are numbered 1, 2, 3, ... in turn order), "
                                                 f"got {page.page_id}")
        if page.first_turn != after:
            raise where.error(f"{name}.first_turn", f"{cover}: page {page.page_id} starts at turn {page.first_turn}, "
                                                    f"expected {after}")
        if page.last_turn < page.first_turn:
            raise where.error(f"{name}.last_turn", f"page {page.page_id} ends at turn {page.last_turn}, before it "
                                                   f"starts ({page.first_turn})")
        if page.last_turn >= n_turns:
            raise where.error(f"{name}.last_turn", f"{cover}: page {page.page_id} ends at turn {page.last_turn}, "
                                                   f"past the last turn ({n_turns - 1})")
        after = page.last_turn + 1
    if after != n_turns:
        field_name = f"localpager.pages[{len(pages) - 1}].last_turn" if pages else "localpager.pages"
        raise where.error(field_name, f"{cover}: the last page ends at turn {after - 1}, expected {n_turns - 1}")
    return pages


def _checked_page(row: Any, where: Where, name: str) -> Page:
    object_of(row, where, name, "a page object")
    no_unknown_keys(row, set(_PAGE_FIELDS), where, f"{name}.")
    for key in ("page_id", "first_turn", "last_turn"):
        required_field(row, key, where, f"{name}.{key}")
    values = {key: _typed(row[key], _PAGE_TYPES[key], where, f"{name}.{key}") for key in _PAGE_FIELDS if key in row}
    for key, least in _PAGE_MINIMUM.items():
        if values.get(key, least) < least:
            raise where.error(f"{name}.{key}", f"must be {least} or more, got {values[key]}")
    if "keywords" in values:
        values["keywords"] = [_typed(k, str, where, f"{name}.keywords[{i}]") for i, k in enumerate(values["keywords"])]
    return Page(**values)


def _checked_vectors(value: Any, where: Where, pages: list[Page], forgotten: set[int],
                     fit: VectorFit | None = None) -> list[tuple]:
    """(page_id, kind, model, source, float32 bytes) of each vector: of a page of the file, of its bookmark,
    its text or one of its turns (not a forgotten one), one per page and kind, the same width for every vector
    of one model, and what ``fit`` asks of the store's vectors."""
    by_id = {p.page_id: p for p in pages}
    widths: dict[str, int] = {}
    seen: set[tuple[int, str]] = set()
    out = []
    for i, row in enumerate(list_of(value, where, "localpager.vectors")):
        name = f"localpager.vectors[{i}]"
        object_of(row, where, name, "a vector object")
        no_unknown_keys(row, _VECTOR_KEYS, where, f"{name}.")
        page_id = _typed(required_field(row, "page_id", where, f"{name}.page_id"), int, where, f"{name}.page_id")
        if page_id not in by_id:
            raise where.error(f"{name}.page_id", f"no page {page_id} in this conversation's pages")
        kind = _checked_kind(required_string(row, "kind", where, name), by_id[page_id], forgotten, where, f"{name}.kind")
        model = required_string(row, "model", where, name)
        source = _typed(required_field(row, "source", where, f"{name}.source"), str, where, f"{name}.source")
        blob = _vector_bytes(required_field(row, "vector", where, f"{name}.vector"), where, f"{name}.vector")
        if widths.setdefault(model, len(blob)) != len(blob):
            raise where.error(f"{name}.vector", f"holds {len(blob) // 4} numbers; the other {model} vectors hold "
                                                f"{widths[model] // 4}")
        if (page_id, kind) in seen:
            raise where.error(f"{name}.kind", f"a second vector for {kind} of page {page_id}")
        seen.add((page_id, kind))
        if fit is None or fit.keeps(model, blob, where, f"{name}.vector"):
            out.append((page_id, kind, model, source, blob))
    return out


def _checked_kind(kind: str, page: Page, forgotten: set[int], where: Where, name: str) -> str:
    turn = kind.removeprefix("turn:")
    if kind in ("bookmark", "text") or (turn != kind and turn.isascii() and turn.isdigit()
                                         and page.holds(int(turn)) and int(turn) not in forgotten):
        return kind
    raise where.error(name, f"must be bookmark, text or turn:N for a turn of page {page.page_id} that is not "
                            f"forgotten ({page.first_turn}..{page.last_turn}), got {show_value(kind)}")


def _vector_bytes(value: Any, where: Where, name: str) -> bytes:
    try:
        blob = base64.b64decode(_typed(value, str, where, name), validate=True)
    except (binascii.Error, ValueError):
        raise where.error(name, "must be base64 (the vector's float32 bytes)") from None
    if not blob or len(blob) % 4:
        raise where.error(name, f"must hold float32 numbers (a multiple of 4 bytes), got {len(blob)} bytes")
    return blob


def import_conversations(held: Held, path: str | os.PathLike, mode: str = ImportMode.ERROR,
                         progress: Progress | None = None, *, merge: Callable[[Entry], int],
                         user: str | None = None) -> ImportReport:
    """Store every conversation of an export (see ``LocalPager.import_file``). ``progress(stage, done,
    total)``: ``read`` by lines, then ``store`` by turns after each conversation (e.g. a tqdm bar each).
    ``merge(entry)`` appends an entry's turns the stored conversation lacks, as new turns are paged, and
    returns how many (``Conversation.merge``). ``user``: whose the conversations are that the file names no
    user for."""
    mode = choose(ImportMode, mode, "import mode")
    if user is not None:
        check_user(user)
    fit = VectorFit(held)
    entries = read_export(path, progress, fit)
    for entry in entries:
        entry.user = entry.user if entry.user is not None else user
    total, stored = sum(len(e.conversation.turns) for e in entries), 0
    store = held.store
    taken = [e.conversation.id for e in entries if store.has_conversation(e.conversation.id)]
    if taken and mode == ImportMode.ERROR:
        raise ValueError(f"already in the store: {', '.join(taken)} (use --replace or --merge)")
    check_owners(store, [(e.conversation.id, e.user) for e in entries if e.conversation.id in taken])
    report = ImportReport(notes=fit.notes())
    with held.lock:
        for entry in entries:  # merges are checked before anything is written
            if entry.conversation.id in taken and mode == ImportMode.MERGE:
                _check_merge(store, entry)
        for entry in entries:
            conv = entry.conversation
            if conv.id in taken and mode == ImportMode.MERGE:
                report.turns += merge(entry)
                report.merged.append(conv.id)
            else:
                if conv.id in taken:
                    report.notes += _unforgetting(store, entry)
                _restore(held, entry, replace=conv.id in taken)
                report.turns += len(conv.turns)
                if conv.id in taken:
                    report.replaced.append(conv.id)
            report.conversations += 1
            report.ids.append(conv.id)
            if progress is not None:
                stored += len(conv.turns)
                progress("store", stored, total)
        if report.replaced:  # what was replaced is erased from the files, as a forget is
            store.erase()
        held.after_erase()
        held.invalidate(report.ids)
    return report


def _restore(held: Held, entry: Entry, replace: bool) -> None:
    """Store an exported conversation as it was; one without store state (a plain interchange line) is
    paged afresh, as ``ingest`` would."""
    conv, state = entry.conversation, entry.state
    pages = state["pages"]
    settings = state["settings"]
    if pages is None:
        from ..core.pager import PagingConfig, page_conversation

        config = PagingConfig.from_dict(settings or {})
        counter = held.models.counter()
        pages = page_conversation(conv.turns, counter, config).pages
        settings = {**config.to_dict(), "tokenizer": counter.name}
    store = held.store
    store.save_conversation(conv.id, conv.turns, pages, conv.probes, settings or {},
                            Origin(state.get("source"), conv.meta), replace=replace, user=entry.user)
    for fact in store.facts(conv.id):
        if (fact.turn, fact.text) in state["pinned_facts"]:
            try:
                store.pin_fact(conv.id, fact.fact_id)
            except PinRefused:  # past the room pinned facts may take here: it stays a fact, unpinned
                pass
    if state["vectors"]:
        store.save_embeddings([(conv.id, *row) for row in state["vectors"]])


def _unforgetting(store: Store, entry: Entry) -> list[str]:
    """A one-line note when replacing brings back text the store had forgotten (an export written before
    the forget still holds it): the user asked to forget it, so say so rather than restore it silently."""
    stored = store.turns(entry.conversation.id)
    back = [t.index for t in entry.conversation.turns if t.text and t.index < len(stored) and not stored[t.index].text]
    if not back:
        return []
    shown = ", ".join(map(str, back[:10])) + (", ..." if len(back) > 10 else "")
    return [f"note: {entry.conversation.id}: this brings back {len(back)} turns that were forgotten (turns {shown}); "
            "forget them again if that is not what you meant"]


def _check_merge(store: Store, entry: Entry) -> None:
    """A merge only extends: the stored turns must be the file's first turns (a forgotten turn on either
    side matches anything)."""
    stored, incoming = store.turns(entry.conversation.id), entry.conversation.turns
    for a, b in zip(stored, incoming):
        if a.role != b.role or (a.text and b.text and a.text != b.text):
            raise ValueError(f"{entry.conversation.id}: the store and the file differ at turn {a.index}; "
                             "use --replace to take the file's")


__all__ = ["Entry", "ImportReport", "conversation_line", "export_conversations", "import_conversations", "read_export",
           "ConversationFileError"]
