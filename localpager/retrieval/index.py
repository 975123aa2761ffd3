"""Embeddings of pages, kept in SQLite and searched with FAISS.

Three signals per page (``Signal``), each its own set of comparable vectors: ``bookmark`` (the bookmark
line), ``text`` (the whole page) and ``turn`` (every turn on its own, kinds ``turn:<index>``; a page scores
as its best-matching turn, which finds the right page most often). A row's ``kind`` in SQLite is its signal,
with the turn's index for ``turn``.

SQLite holds the vectors (the source of truth). A FAISS index per signal is saved beside the store and
rebuilt from it whenever the file is missing, unreadable or stale. A file is written only under the store's
FAISS lock, by a process that has just read there that nothing was erased and no vector changed since its
index was built (``SignalIndex._save``): an erase in another process rewrites the files under the same lock,
so an index holding an erased vector is never written back after it. A file is read only when its sha256 (in
its ``.json``) matches, it is an ``IndexIDMap2`` over a flat inner-product index of this embedder's width,
and its ids are the store's rows; anything else is rebuilt from the store with one warning.

A store on a database server (PostgreSQL: ``store.local`` is false) keeps nothing beside it: each process
builds one index per signal and conversation in memory from the rows, keeps the most recently used
(``CONVERSATION_INDEXES``), and rebuilds one when the conversation's vector version moved (another replica
changed its vectors).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..core.choices import choose
from ..core.records import Page, Turn
from ..store.base import Store
from .choices import Signal
from .embedder import TextEmbedder
SEARCH_THREADS = 1  # measured: one thread is faster for flat search at this size
CONVERSATION_INDEXES = 256  # per-conversation indexes kept in memory (a store on a database server)
# An index with fewer vectors is saved after every change; a larger one (100,000 turns: a 150 MB file, 0.5 s
# to write) when the LocalPager closes (``PageIndex.flush``). A process that ends without closing leaves a
# file the next one finds stale by its fingerprint, and rebuilds from the store.
SAVE_NOW_BELOW = 20_000
log = logging.getLogger(__name__)


@contextmanager
def faiss_threads(n: int):
    """FAISS searches with ``n`` OpenMP threads inside the block; the thread count before comes back after.

    OpenMP keeps the setting per calling thread, so the rest of the process (and its other threads) never
    sees it: importing localpager or building an index leaves the process's thread settings alone."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(n)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def private_file(path: Path) -> None:
    """Create ``path`` (or take an existing one) readable and writable by its owner only, so that what is
    then written into it never exists with wider permissions."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


_FILE_LOCKS: dict[str, object] = {}  # store path -> its FAISS files' lock (one per process: re-entrant)
_FILE_LOCKS_GUARD = threading.Lock()


def _files_lock(store_path):
    """The lock on a store's FAISS files: one object per store and process, so that a thread holding it (an
    erase rewriting every file) may take it again (each index's save); another process or thread waits."""
    from ..store.locks import named_lock

    with _FILE_LOCKS_GUARD:
        key = str(store_path)
        if key not in _FILE_LOCKS:
            _FILE_LOCKS[key] = named_lock(store_path, "faiss")
        return _FILE_LOCKS[key]


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes (hex), read in chunks."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


class DamagedFile(ValueError):
    """A file beside the store that is not what this store wrote: rebuilt from the store."""


def check_flat_index(index, dim: int) -> None:
    """Raise ``DamagedFile`` unless ``index`` is what ``SignalIndex`` makes: an ``IndexIDMap2`` over a flat
    inner-product index of ``dim`` numbers a vector, with one id per vector (any other kind, an HNSW graph,
    another width, would be read past its buffer or fail on use)."""
    import faiss

    if not isinstance(index, faiss.IndexIDMap2):
        raise DamagedFile(f"it holds an index of kind {type(index).__name__}, not IndexIDMap2")
    inner = faiss.downcast_index(index.index)
    if type(inner) not in (faiss.IndexFlat, faiss.IndexFlatIP) or inner.metric_type != faiss.METRIC_INNER_PRODUCT:
        raise DamagedFile(f"its IndexIDMap2 holds an index of kind {type(inner).__name__}, not a flat inner-product "
                          "one")
    if index.d != dim or inner.d != dim:
        raise DamagedFile(f"vectors of {index.d} numbers, not {dim}")
    if inner.ntotal != index.ntotal or index.id_map.size() != index.ntotal or \
            inner.codes.size() != index.ntotal * dim * 4:
        raise DamagedFile("its vector count, ids and storage disagree")


@dataclass
class Hit:
    page_id: int
    score: float
    kind: str  # which row matched best: "bookmark", "text" or "turn:<index>"

    @property
    def turn(self) -> int | None:
        return int(self.kind.split(":")[1]) if self.kind.startswith("turn:") else None


class SignalIndex:
    """One FAISS inner-product index over one signal's rows, keyed by the rows' SQLite rowids."""

    conv_id: str | None = None  # the whole store's rows (one conversation's: a database server's store)
    files = True  # saved beside the store
    _all_turns: int | None = None  # ``moved`` when ``_turns`` last held every conversation that has turn rows

    def __init__(self, store: Store, signal: str, dim: int, rebuild: bool = False, conv_id: str | None = None):
        """``rebuild``: from the store, never from the saved file (after a VACUUM renumbered the rows).
        ``conv_id``: one conversation's rows only, in memory (a store on a database server)."""
        self.store, self.signal, self.dim, self.conv_id = store, signal, dim, conv_id
        self.path = Path(f"{store.path}.{signal}.faiss")
        self.meta_path = self.path.with_suffix(".json")
        self.rows: dict[int, tuple[str, int, str]] = {}  # rowid -> (conv_id, page_id, kind)
        self.fingerprint: list = []  # the store's embedding_fingerprint this index reflects
        self.generation: int | None = None  # the store's erase generation it was built under (read before its rows)
        self.skipped = 0  # rows of the signal left out: vectors of another width than ``dim`` (another embedder's)
        # files beside the store: only for a whole local store (and never an encrypted or read-only one)
        self.files = conv_id is None and store.local
        self.dirty = False  # changed since saved (``flush``)
        self.changes = 0  # moves whenever rows are added or removed
        # moves whenever rows already indexed may change places (a removal, a rebuild): what ``conversation_turns``
        # caches by; an addition appends, so it appends the added rows' places to their conversations' cached ones
        self.moved = 0
        self._turns: dict[str, tuple[int, np.ndarray, np.ndarray, np.ndarray]] = {}
        self.index = (None if rebuild or not self.files else self._load()) or self._rebuild()

    @contextmanager
    def _files(self):
        """The FAISS files of this store, locked against other processes (one ``flock`` beside them): two
        processes writing the same temporary file, or one reading while another renames, would corrupt."""
        if self.store.read_only:
            yield
            return
        with _files_lock(self.store.path):
            yield

    def current(self) -> bool:
        """Whether this index still reflects the store: another process may have changed the vectors."""
        return bool(self.fingerprint) and self.fingerprint[0] == self._version()

    def _version(self):
        if self.conv_id is None:
            return self.store.embeddings_version()
        return self.store.embeddings_version(self.conv_id)

    def _fingerprint(self) -> list:
        if self.conv_id is None:
            return self.store.embedding_fingerprint(self.signal)
        return self.store.embedding_fingerprint(self.signal, self.conv_id)

    def _fresh(self):
        import faiss

        return faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))

    def _load(self):
        """The saved index, if it is current for the store (fingerprint, erase generation, width) and intact
        (checksum, kind, ids); None if missing or stale, and None with one warning if damaged or foreign (the
        caller rebuilds it from the store, and the rebuilt file replaces it)."""
        import faiss

        if self.store.encrypted:  # never read vectors beside an encrypted store
            return None
        try:
            with self._files():
                meta = json.loads(self.meta_path.read_text())
                generation = self.store.erase_generation()
                if not isinstance(meta, dict):
                    raise DamagedFile("its .json is not one this localpager writes")
                if "sha256" not in meta:  # written by an earlier localpager: rebuilt once, no warning
                    return None
                if (meta.get("fingerprint") != self.store.embedding_fingerprint(self.signal)
                        or meta.get("dim") != self.dim or meta.get("erasures") != generation):
                    return None  # stale: the store changed since (a rebuild follows, no warning)
                if file_sha256(self.path) != meta["sha256"]:
                    raise DamagedFile("its checksum does not match")
                index = faiss.read_index(str(self.path))
                check_flat_index(index, self.dim)
                rows = self._checked_rows(index, meta.get("skipped", 0))
        except FileNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001 - derived data, whatever is wrong with it: rebuilt from the store
            log.warning("rebuilding %s from the store: %s", self.path, str(exc).splitlines()[0] if str(exc) else
                        type(exc).__name__)
            return None
        self.rows = rows
        self.fingerprint, self.generation, self.skipped = meta["fingerprint"], generation, meta.get("skipped", 0)
        return index

    def _checked_rows(self, index, skipped) -> dict[int, tuple[str, int, str]]:
        """The store's rows the saved ``index`` holds, by rowid; ``DamagedFile`` unless its ids are exactly the
        store's rows of the signal (less the ``skipped`` rows of another width): a row the store no longer
        has is never ranked."""
        import faiss

        keys = self.store.embedding_keys(self.signal)
        ids = np.sort(faiss.vector_to_array(index.id_map)) if index.ntotal else np.zeros(0, dtype=np.int64)
        rowids = np.array([r[0] for r in keys], dtype=np.int64)
        if type(skipped) is not int or index.ntotal + skipped != len(keys):
            raise DamagedFile("it holds another number of vectors than the store")
        exact = np.array_equal(ids, rowids) if not skipped else (
            bool(np.isin(ids, rowids).all()) and not np.any(ids[1:] == ids[:-1]))
        if not exact:
            raise DamagedFile("its ids are not the store's rows")
        stored = {r[0]: (r[1], r[2], r[3]) for r in keys}
        return {int(i): stored[int(i)] for i in ids} if skipped else stored

    def _rebuild(self):
        self.generation = self.store.erase_generation()  # first: the rows read after it are at least this recent
        self.fingerprint = self._fingerprint()  # before the rows: never ahead of them
        rows = self.store.embedding_rows(self.signal, self.conv_id)
        index = self._fresh()
        self.rows, self.skipped = {}, 0
        self.moved += 1
        self._add(index, rows)
        self.index = index
        self.save()
        return index

    def _add(self, index, rows) -> None:
        self.changes += 1
        width = 4 * self.dim
        fitting = [r for r in rows if len(r[6]) == width]
        if len(fitting) != len(rows):  # another embedder's vectors (never stored by import): left out, not fatal
            self.skipped += len(rows) - len(fitting)
            log.warning("%s: left out %d vectors that are not %d numbers wide (another embedder's); they are "
                        "embedded again when their pages are", self.path.name, len(rows) - len(fitting), self.dim)
        if not fitting:
            return
        base = index.ntotal  # the rows are appended to the storage in this order: their places
        vectors = np.stack([np.frombuffer(r[6], dtype=np.float32) for r in fitting])
        index.add_with_ids(vectors, np.array([r[0] for r in fitting], dtype=np.int64))
        self.rows.update({r[0]: (r[1], r[2], r[3]) for r in fitting})
        added: dict[str, list[tuple[int, int, int]]] = {}
        for place, r in enumerate(fitting, base):
            if r[3].startswith("turn:"):
                added.setdefault(r[1], []).append((place, int(r[3][5:]), r[2]))
        for conv_id, new in added.items():  # appended to the places worked out (nothing else moved), not again
            cached = self._turns.get(conv_id)
            if cached is None and self._all_turns == self.moved:  # known to have had no turn rows
                cached = (self.moved, *(np.zeros(0, dtype=np.int64) for _ in range(3)))
            if cached is None or cached[0] != self.moved:
                continue
            places, turns, pages = (np.array(column, dtype=np.int64) for column in zip(*new))
            self._turns[conv_id] = (self.moved, np.concatenate([cached[1], places]),
                                    np.concatenate([cached[2], turns]), np.concatenate([cached[3], pages]))

    @property
    def writes_files(self) -> bool:
        """Whether this index is saved beside the store: a whole local store, neither encrypted nor read-only."""
        return self.files and not (self.store.encrypted or self.store.read_only)

    def _still_current(self) -> bool:
        """Read under the files' lock just before writing: nothing was erased since this index was built and no
        vector changed since it was brought up to date. An erase in another process moves the erase generation
        in the transaction that deletes the rows, then rewrites the files under this lock: a save either lands
        before that rewrite (and is replaced by it) or sees the new generation here and writes nothing."""
        from ..store.base import StoreError

        try:
            return self.generation == self.store.erase_generation() and self.fingerprint == self._fingerprint()
        except StoreError:  # a closed store: nothing can be checked, so nothing is written
            return False

    def _save(self) -> None:
        """Write the index and its fingerprint beside the store, owner-only, if it is still current (see
        ``_still_current``); an encrypted store's index stays in memory (rebuilt from the store on open), so no
        vector lands on disk in the clear. The ``.json`` (fingerprint, width, erase generation, checksum) is
        removed first and written last: a process killed in between leaves a file without one, rebuilt."""
        import faiss

        if not self.writes_files:
            return
        try:
            with self._files():
                if not self._still_current():
                    log.debug("not saving %s: the store changed since it was built", self.path)
                    return
                tmp = self.path.with_suffix(".tmp")
                private_file(tmp)
                faiss.write_index(self.index, str(tmp))
                meta = {"fingerprint": self.fingerprint, "dim": self.dim, "erasures": self.generation,
                        "skipped": self.skipped, "sha256": file_sha256(tmp)}
                meta_tmp = self.meta_path.with_name(self.meta_path.name + ".tmp")  # replaced whole, never half written
                private_file(meta_tmp)
                meta_tmp.write_text(json.dumps(meta))
                self.meta_path.unlink(missing_ok=True)
                tmp.replace(self.path)
                meta_tmp.replace(self.meta_path)
        except (OSError, RuntimeError) as exc:  # derived data: the store is intact, the next open rebuilds
            log.warning("could not save %s (%s); it will be rebuilt from the store", self.path, exc)
            self.meta_path.unlink(missing_ok=True)

    def refresh(self, replaced: Sequence[int], rows, version: int) -> None:
        """Drop replaced rowids, add the rows not indexed (after the drop: SQLite may give a replacing row
        the rowid it replaced), mark the index current at the store's ``version``, save."""
        if replaced:
            self.changes += 1
            self.moved += 1  # a removal compacts the storage: every place after it moves
            self.index.remove_ids(np.array(replaced, dtype=np.int64))
            for rowid in replaced:
                if self.rows.pop(rowid, None) is None and self.skipped:  # a row of another width, left out
                    self.skipped -= 1
        self._add(self.index, [r for r in rows if r[0] not in self.rows])
        self.fingerprint = [version, len(self.rows) + self.skipped]
        if self.index.ntotal < SAVE_NOW_BELOW:
            self.save()
        else:  # a large file is rewritten whole: not on every eviction, but by ``flush`` (on close)
            self.dirty = True

    def flush(self) -> None:
        """Save the index if changes are waiting (``refresh`` on a large index defers its save)."""
        if self.dirty:
            self.save()

    def save(self) -> None:
        self.dirty = False
        self._save()

    def conversation_turns(self, conv_id: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(place in the index's storage, turn index, page id) of each of ``conv_id``'s turn rows; worked out
        again only after rows of it were added or any were removed, so a question reads no rows from the store
        (and a user's many other conversations are not worked out again when one of them grows)."""
        import faiss

        cached = self._turns.get(conv_id)
        if cached is not None and cached[0] == self.moved:
            return cached[1:]
        if cached is None and self._all_turns == self.moved:  # every conversation with turn rows is known
            return tuple(np.zeros(0, dtype=np.int64) for _ in range(3))
        # one pass over the rows works out every conversation not known as they are now (after a removal, all
        # of a user's many conversations are asked for next: one pass, not one each)
        known = {c for c, held in self._turns.items() if held[0] == self.moved}
        mine: dict[str, list[tuple[int, int, int]]] = {conv_id: []}
        for rowid, (conv, page_id, kind) in self.rows.items():
            if conv not in known and kind.startswith("turn:"):
                mine.setdefault(conv, []).append((rowid, page_id, int(kind[5:])))
        ids = faiss.vector_to_array(self.index.id_map) if self.index.ntotal else np.zeros(0, dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        ordered = ids[order]
        for conv, rows in mine.items():
            rowids = np.array([r[0] for r in rows], dtype=np.int64)
            places = order[np.searchsorted(ordered, rowids)] if len(rowids) else np.zeros(0, dtype=np.int64)
            self._turns[conv] = (self.moved, places, np.array([r[2] for r in rows], dtype=np.int64),
                                 np.array([r[1] for r in rows], dtype=np.int64))
        self._all_turns = self.moved
        return self._turns[conv_id][1:]

    def similarities(self, query: np.ndarray, places: np.ndarray) -> np.ndarray:
        """Inner product of ``query`` with the vectors stored at ``places`` (exhaustive, as the flat index
        searches, with its kernel: one pass over the span of storage those places cover, no copy of it)."""
        import faiss

        if not len(places):
            return np.zeros(0, dtype=np.float32)
        flat = faiss.downcast_index(self.index.index)
        stored = faiss.rev_swig_ptr(flat.get_xb(), self.index.ntotal * self.dim).reshape(self.index.ntotal, self.dim)
        low, high = int(places.min()), int(places.max()) + 1
        span = stored[low:high]  # a view: contiguous rows
        query = np.ascontiguousarray(query, dtype=np.float32)
        out = np.empty(high - low, dtype=np.float32)
        # FAISS's own inner-product kernel (the flat index's): about twice numpy's matrix-vector product here
        faiss.fvec_inner_products_ny(faiss.swig_ptr(out), faiss.swig_ptr(query), faiss.swig_ptr(span), self.dim,
                                     high - low)
        return out[places - low]

    def search(self, query: np.ndarray, rowids: Sequence[int]) -> list[tuple[int, float]]:
        """(rowid, similarity) of ``rowids`` best first; the search never leaves that set."""
        import faiss

        if not rowids:
            return []
        params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(np.array(rowids, dtype=np.int64)))
        with faiss_threads(SEARCH_THREADS):
            scores, ids = self.index.search(query.reshape(1, -1), len(rowids), params=params)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]


class PageIndex:
    """Embeds pages when they are created or their keywords change, and ranks them against a query."""

    def __init__(self, store: Store, embedder: TextEmbedder):
        self.store = store
        self.embedder = embedder
        # a store on a database server: one index per (signal, conversation), the most recently used kept
        self.per_conversation = not store.local
        self._signals: OrderedDict = OrderedDict()  # signal (or (signal, conversation)) -> SignalIndex
        # conversation -> (the store's vector version, {page id: (first turn, last turn)} whose turns this
        # process embedded or checked, the turn vectors per page counted when it first looked)
        self._embedded: dict[str, tuple[int, dict[int, tuple[int, int]], dict[int, int]]] = {}
        self._lock = threading.RLock()

    def _key(self, signal: str, conv_id: str | None):
        return (signal, conv_id) if self.per_conversation and conv_id is not None else signal

    def unload(self) -> dict[str, SignalIndex]:
        """Drop the loaded FAISS indexes (read again from their files, or rebuilt, on next use) and the
        embedder's cache of texts; returns what was loaded."""
        with self._lock:
            loaded, self._signals = self._signals, OrderedDict()
            self._embedded = {}
        self.embedder.clear_cache()
        return loaded

    def flush(self) -> None:
        """Save the loaded indexes whose save was deferred (see ``SAVE_NOW_BELOW``)."""
        with self._lock:
            for index in self._signals.values():
                index.flush()

    def adopt(self, index: SignalIndex) -> None:
        """Use ``index`` (just rebuilt) for its signal."""
        with self._lock:
            self._signals[index.signal] = index

    def signal(self, name: str, conv_id: str | None = None) -> SignalIndex:
        """The FAISS index of signal ``name``, read (or rebuilt) on first use and again whenever another process
        changed the vectors; on a database server's store, ``conv_id``'s own (built in memory)."""
        name = choose(Signal, name, "signal")
        key = self._key(name, conv_id)
        with self._lock:
            if key not in self._signals or not self._signals[key].current():
                scope = conv_id if key != name else None
                self._signals[key] = SignalIndex(self.store, name, self.embedder.dim, conv_id=scope)
            self._signals.move_to_end(key)
            while self.per_conversation and len(self._signals) > CONVERSATION_INDEXES:
                self._signals.popitem(last=False)
            return self._signals[key]

    def sources(self, page: Page, turns: Sequence[Turn], bookmark: Callable[[Page], str]) -> dict[str, str]:
        """The text each vector of ``page`` embeds, by kind."""
        out = {"bookmark": " ".join(page.keywords) or bookmark(page), "text": page.text}
        out.update({f"turn:{i}": turns[i].text for i in page.turn_range if turns[i].text})  # not forgotten
        return out

    def update(self, conv_id: str, pages: Sequence[Page], turns: Sequence[Turn],
               bookmark: Callable[[Page], str], signals: Sequence[str] = (Signal.TURN,)) -> int:
        """Embed whatever of ``pages`` is missing or changed in ``signals`` (default: the turns, all that
        recall ranks; whole-page texts, long and costly to embed, only when a signal asks for them);
        returns how many vectors were computed.

        For the turns alone (every question asks it of every evicted page), a page whose turns were embedded
        as they are, while the store's vectors have not changed since, is not looked at again: a question
        reads no rows for the pages it already knows."""
        signals = {choose(Signal, s, "signal") for s in signals}
        if signals != {Signal.TURN}:
            return self._update(conv_id, pages, turns, bookmark, signals)[0]
        with self._lock:
            version = self._version(conv_id)
            known = self._embedded.get(conv_id)
            if known is None or known[0] != version:  # a first look, or another process wrote vectors
                known = (version, {}, self.store.embedded_turn_counts(conv_id, self.embedder.name))
                self._embedded[conv_id] = known
            _, spans, counts = known
            todo = []
            for p in pages:
                span = (p.first_turn, p.last_turn)
                if spans.get(p.page_id) == span:
                    continue
                if _all_embedded(p, turns, counts):
                    spans[p.page_id] = span  # checked once by its count: a dict lookup from now on
                else:
                    todo.append(p)
            if not todo:
                return 0
            computed, before, after = self._update(conv_id, todo, turns, bookmark, signals)
            if computed and before != version:  # another process wrote vectors meanwhile: look again next time
                self._embedded.pop(conv_id, None)
                return computed
            spans = dict(spans)
            spans.update({p.page_id: (p.first_turn, p.last_turn) for p in todo})
            self._embedded[conv_id] = (after if computed else version, spans, counts)
            return computed

    def _version(self, conv_id: str) -> int:
        return self.store.embeddings_version(conv_id) if self.per_conversation else self.store.embeddings_version()

    def _update(self, conv_id: str, pages: Sequence[Page], turns: Sequence[Turn],
                bookmark: Callable[[Page], str], signals: set[str]) -> tuple[int, int | None, int | None]:
        """``update``'s work: (vectors computed, the store's vector version before and after saving them)."""
        with self._lock:
            page_ids = [p.page_id for p in pages]
            stored = {}
            for signal in Signal:
                for rowid, _, page_id, kind, model, source in self.store.embedding_rows(
                        signal, conv_id, page_ids, vectors=False):
                    stored[(page_id, kind)] = (rowid, source, model)
            todo = []
            for page in pages:
                for kind, text in self.sources(page, turns, bookmark).items():
                    if kind.split(":")[0] not in signals:
                        continue
                    old = stored.get((page.page_id, kind))
                    if old is None or old[1] != text or old[2] != self.embedder.name:
                        todo.append((page.page_id, kind, text, old[0] if old else None))
            if not todo:
                return 0, None, None
            vectors = self.embedder.encode([t[2] for t in todo])
            before, after = self.store.save_embeddings([
                (conv_id, page_id, kind, self.embedder.name, text, vec.tobytes())
                for (page_id, kind, text, _), vec in zip(todo, vectors)
            ])
            for signal in Signal:
                key = self._key(signal, conv_id)
                loaded = self._signals.get(key)
                if loaded is None:
                    continue
                if not loaded.fingerprint or loaded.fingerprint[0] != before:  # another process wrote vectors
                    del self._signals[key]  # reloaded (from the files or the store) on next use
                    continue
                mine = [t for t in todo if t[1].split(":")[0] == signal]
                new_rows = self.store.embedding_rows(signal, conv_id, sorted({t[0] for t in mine}))
                loaded.refresh([t[3] for t in mine if t[3] is not None], new_rows, after)
            return len(todo), before, after

    def turn_scores(self, conv_id: str, query: str | np.ndarray, page_ids: Sequence[int]) -> dict[int, float]:
        """Cosine similarity of ``query`` to every embedded turn of ``page_ids``, by turn index."""
        if not page_ids:
            return {}
        index = self.signal(Signal.TURN, conv_id)
        vector = self.embedder.encode_one(query) if isinstance(query, str) else query
        with self._lock:
            rowids = [r[0] for r in self.store.embedding_rows(Signal.TURN, conv_id, page_ids, vectors=False)]
            return {int(index.rows[rowid][2].split(":")[1]): score for rowid, score in index.search(vector, rowids)}

    def turn_cosines(self, conv_id: str, query: str | np.ndarray,
                     page_ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """``turn_scores`` as arrays (turn indices, cosines), from the loaded index alone: no rows read."""
        if not len(page_ids):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        index = self.signal(Signal.TURN, conv_id)
        vector = self.embedder.encode_one(query) if isinstance(query, str) else query
        with self._lock:
            places, turns, pages = index.conversation_turns(conv_id)
            wanted = np.asarray(page_ids, dtype=np.int64)
            lookup = np.zeros(max(int(wanted.max()), int(pages.max(initial=0))) + 1, dtype=bool)
            lookup[wanted] = True
            keep = lookup[pages]
            return turns[keep], index.similarities(vector, places[keep])

    def all_turn_cosines(self, conv_id: str, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(turn indices, cosines) of every embedded turn of ``conv_id``, from the loaded index alone: another
        conversation of a user, searched without loading it (``retrieval.user_recall``)."""
        index = self.signal(Signal.TURN, conv_id)
        with self._lock:
            places, turns, _ = index.conversation_turns(conv_id)
            return turns, index.similarities(query, places)

    def best_turn_cosines(self, conv_ids: Sequence[str], query: np.ndarray) -> dict[str, float]:
        """{conversation: the best cosine of its embedded turns with ``query``} of each of ``conv_ids`` that has
        any (``all_turn_cosines``' best of each), from the loaded index alone: in one pass over the span of storage
        their turns cover, not one per conversation (a user's conversations, grown side by side, interleave)."""
        if self.per_conversation:  # a database server's store: an index per conversation
            out = {}
            for conv_id in conv_ids:
                _, cosines = self.all_turn_cosines(conv_id, query)
                if len(cosines):
                    out[conv_id] = float(cosines.max())
            return out
        index = self.signal(Signal.TURN)
        with self._lock:
            places = {conv_id: index.conversation_turns(conv_id)[0] for conv_id in conv_ids}
            places = {conv_id: p for conv_id, p in places.items() if len(p)}
            if not places:
                return {}
            cosines = index.similarities(query, np.concatenate(list(places.values())))
            ends = np.cumsum([len(p) for p in places.values()])
            best = np.maximum.reduceat(cosines, ends - [len(p) for p in places.values()])
            return {conv_id: float(b) for conv_id, b in zip(places, best)}

    def embedded_turn_cosines(self, conv_id: str, query: str | np.ndarray,
                              turns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions in ``turns`` (turn indices) of those with a vector in the index, their cosines with
        ``query``), from the loaded index alone, whatever page each is in (a resident one's too, when embedded)."""
        turns = np.asarray(turns, dtype=np.int64)
        none = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if not len(turns):
            return none
        index = self.signal(Signal.TURN, conv_id)
        with self._lock:
            places, embedded, _ = index.conversation_turns(conv_id)
            if not len(embedded):
                return none
            where = np.full(max(int(embedded.max()), int(turns.max())) + 1, -1, dtype=np.int64)
            where[embedded] = places
            found = where[turns]
            have = np.flatnonzero(found >= 0)
            if not len(have):
                return none
            vector = self.embedder.encode_one(query) if isinstance(query, str) else query
            return have, index.similarities(vector, found[have])

    def rank(self, conv_id: str, query: str | np.ndarray, page_ids: Sequence[int],
             signal: str = Signal.TURN) -> list[Hit]:
        """``page_ids`` ranked by similarity to ``query`` under one signal; a page scores as its best row."""
        if not page_ids:
            return []
        index = self.signal(signal, conv_id)
        vector = self.embedder.encode_one(query) if isinstance(query, str) else query
        with self._lock:
            rowids = [r[0] for r in self.store.embedding_rows(index.signal, conv_id, page_ids, vectors=False)]
            best: dict[int, Hit] = {}
            for rowid, score in index.search(vector, rowids):
                _, page_id, kind = index.rows[rowid]
                if page_id not in best or score > best[page_id].score:
                    best[page_id] = Hit(page_id, score, kind)
        return sorted(best.values(), key=lambda h: -h.score)


def _all_embedded(page: Page, turns: Sequence[Turn], counts: dict[int, int]) -> bool:
    """Whether ``counts`` (``Store.embedded_turn_counts``) has a vector for every turn of ``page`` with text: a
    turn's text changes only by being forgotten (its vector goes with it), so the count is the check that
    reading every row's source text would make, in one query for the whole conversation."""
    return counts.get(page.page_id, 0) == sum(1 for i in page.turn_range if i < len(turns) and turns[i].text)


def rewrite_indexes(store: Store, page_index: PageIndex | None = None) -> None:
    """Rebuild every saved index from the store (after vectors were deleted and the database vacuumed,
    which renumbers rows): each file is replaced by one without the deleted vectors, an index loaded in
    ``page_index`` is rebuilt too, and an index file whose size cannot be read is deleted."""
    loaded = page_index.unload() if page_index is not None else {}
    if not store.local:  # nothing on disk: the indexes are built again from the rows on use
        return
    writable = not (store.read_only or store.encrypted)
    rebuilt = []
    with _files_lock(store.path) if writable else contextlib.nullcontext():  # no save of another process between
        for signal in Signal:
            path = Path(f"{store.path}.{signal}.faiss")
            dim = loaded[signal].dim if signal in loaded else _saved_dim(path.with_suffix(".json"))
            if dim is None:
                for stale in (path, path.with_suffix(".json"), path.with_suffix(".tmp")):
                    stale.unlink(missing_ok=True)
                continue
            rebuilt.append(SignalIndex(store, signal, dim, rebuild=True))
    for index in rebuilt:  # after the files' lock: a thread saving an index takes that lock inside the index's
        if page_index is not None and index.signal in loaded:
            page_index.adopt(index)


def _saved_dim(meta_path: Path) -> int | None:
    try:
        dim = json.loads(meta_path.read_text())["dim"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return dim if type(dim) is int and 0 < dim <= 65_536 else None
