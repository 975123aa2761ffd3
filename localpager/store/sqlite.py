"""The persistent page store: SQLite, the source of truth for everything localpager knows.

Every change is one transaction, so a process killed at any moment leaves either the whole change or
none of it. The database file is created readable by its owner only: it holds private conversations.
Anything derived (the FAISS index) can be rebuilt from here.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..core.checks import check_id, check_text
from ..core.records import Page, Probe, Turn
from .naming import is_url as _looks_like_url
from .schema import migrations

STORE_ENV = "LOCALPAGER_STORE"
BUSY_TIMEOUT_MS = 10_000  # how long a write waits for another process's transaction
UNANSWERED, INTERRUPTED = "unanswered", "interrupted"  # a question's trace before its answer / if none came

# Each entry moves the schema up one version; never edit an entry that has shipped, add one (in schema.py:
# one list for SQLite and PostgreSQL, rendered here in SQLite's words, exactly as it always read).
MIGRATIONS: tuple[str, ...] = migrations("sqlite")
SCHEMA_VERSION = len(MIGRATIONS)


class StoreError(RuntimeError):
    """A store that cannot be used as asked (unknown conversation, newer schema, not a database)."""


class ConversationNotFound(StoreError):
    pass


class StoreBusy(StoreError):
    """Another process held the store's write lock longer than ``BUSY_TIMEOUT_MS``."""


class ConversationChanged(StoreError):
    """The conversation changed under an open ``Conversation`` (another process wrote to it)."""


class ConversationBusy(StoreError):
    """Another process (or thread) kept the conversation for longer than we were willing to wait."""


@dataclass
class ConversationInfo:
    id: str
    turns: int
    pages: int
    evicted: int
    probes: int
    source: str | None
    settings: dict[str, Any] = field(default_factory=dict)


def default_store_path() -> Path:
    """``$LOCALPAGER_STORE``, else ``localpager.db`` in the user's data directory."""
    if env := os.environ.get(STORE_ENV):
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("localpager", appauthor=False)) / "localpager.db"


def _create_private(path: Path) -> None:
    """Create the database file (and the folders it needs) readable by the owner only."""
    missing = [d for d in (path.parent, *path.parent.parents) if not d.exists()]
    for folder in reversed(missing):  # mkdir(parents=True) would give the parents default permissions
        folder.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    os.close(fd)


def _driver(key: str | None):
    """The DB-API module: sqlite3, or SQLCipher's (the ``encrypt`` extra) when there is a key."""
    if key is None:
        return sqlite3
    if not key:
        raise StoreError("the encryption key is empty")
    try:
        from sqlcipher3 import dbapi2
    except ImportError:
        raise StoreError("encryption needs SQLCipher: pip install 'localpager[encrypt]'") from None
    return dbapi2


def _unlock(conn, key: str) -> None:
    """Give SQLCipher the key and check it on the first page: a wrong key fails here, before any write."""
    conn.execute("PRAGMA cipher_log_level = NONE")  # a wrong key is our one-line error, not log lines on stderr
    conn.execute("PRAGMA key = '" + key.replace("'", "''") + "'")
    conn.execute("SELECT count(*) FROM sqlite_master").fetchall()


class Store:
    """A SQLite page store holding many conversations. Thread-safe: one connection, one lock."""

    kind = "sqlite"
    local = True  # a file on this machine: lock files, FAISS indexes and saved KV caches live beside it

    def __init__(self, path: str | os.PathLike | None = None, *, key: str | None = None):
        self.path = Path(path) if path is not None else default_store_path()
        if _looks_like_url(str(path) if path is not None else str(self.path)):
            raise StoreError(f"{path or self.path} is a database URL, not a file: open it with LocalPager(url) or "
                             "localpager.store.location.open_store(url) (PostgreSQL: postgresql://USER@HOST:PORT/DB)")
        # ``key``: the whole database is encrypted with SQLCipher; derived indexes then stay in memory
        self.encrypted = key is not None
        driver = _driver(key)  # before anything is created: a missing extra leaves no empty file behind
        if not self.path.exists():
            _create_private(self.path)
        # read-only to us (permissions, a read-only mount): opened so that SQLite creates nothing beside it
        self.read_only = not (os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK))
        self._lock = threading.RLock()
        target, uri = (_read_only_uri(self.path), True) if self.read_only else (self.path, False)
        self._conn = driver.connect(target, uri=uri, isolation_level=None, check_same_thread=False)
        try:
            # first: every later statement, migrations included, may have to wait for another process
            self._conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            if key is not None:
                _unlock(self._conn, key)
            self._conn.execute("SELECT count(*) FROM sqlite_master").fetchall()  # not a database: fails here
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._set_up()
        except (sqlite3.DatabaseError, driver.DatabaseError) as exc:
            self._conn.close()
            hint = ""
            if "not a database" in str(exc):
                hint = (" (wrong key, or not an encrypted store)" if key is not None
                        else " (encrypted? give its key: --key-env NAME, or key=...)")
            raise StoreError(f"cannot open store {self.path}: {exc}{hint}") from None

    # -- plumbing -----------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic change: committed whole on success, rolled back whole on any error."""
        with self._lock:
            if self.read_only:
                raise StoreError(f"store {self.path} is read-only (no write permission on it or its folder)")
            try:
                self._conn.execute("BEGIN IMMEDIATE")  # the write lock now: no other writer between read and write
            except sqlite3.OperationalError as exc:
                raise self._error(exc) from None
            except sqlite3.ProgrammingError as exc:
                raise StoreError(f"store {self.path} is closed") if "closed" in str(exc) else exc from None
            try:
                yield self._conn
            except BaseException as exc:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.OperationalError) or type(exc) is sqlite3.DatabaseError:
                    raise self._error(exc) from None
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise self._error(exc) from None

    def _error(self, exc: sqlite3.Error) -> StoreError:
        """A one-line StoreError naming the store for what SQLite reported (busy, read-only, disk full)."""
        text = str(exc)
        if "locked" in text or "busy" in text:
            return StoreBusy(f"store {self.path} is busy: another process kept it locked for "
                             f"{BUSY_TIMEOUT_MS // 1000} s; try again")
        if "readonly" in text or "read-only" in text:
            return StoreError(f"store {self.path} is read-only: {text}")
        if "full" in text or "I/O" in text:
            return StoreError(f"cannot write store {self.path}: {text} (is the disk full?); nothing was changed")
        return StoreError(f"store {self.path}: {text}")

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                cur = self._conn.execute(sql, args)
            except sqlite3.ProgrammingError as exc:  # used after close(): say so, in one line
                raise StoreError(f"store {self.path} is closed") if "closed" in str(exc) else exc from None
            return cur.fetchall()

    @property
    def schema_version(self) -> int:
        return self._query("PRAGMA user_version")[0][0]

    def _newer_schema(self, version: int) -> StoreError:
        return StoreError(
            f"store {self.path} has schema {version}, newer than this localpager ({SCHEMA_VERSION}); upgrade localpager"
        )

    def _set_up(self) -> None:
        """WAL mode and the schema, once, by one process: several processes opening a new store at once
        would otherwise each create the tables ("table already exists")."""
        version = self.schema_version
        if version > SCHEMA_VERSION:
            raise self._newer_schema(version)
        wal = self._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        if wal and version == SCHEMA_VERSION:
            return
        if self.read_only:
            if version < SCHEMA_VERSION:
                raise StoreError(f"store {self.path} is read-only and has schema {version}: open it once with "
                                 f"write access to upgrade it to {SCHEMA_VERSION}")
            return
        from .locks import named_lock

        with named_lock(self.path, "schema"):
            if not wal:
                self._conn.execute("PRAGMA journal_mode=WAL")
            self._migrate()

    def _migrate(self) -> None:
        """Every missing migration in one BEGIN IMMEDIATE transaction: the version is read again under the
        write lock, so a process that waited finds the work done; a crash leaves the old schema whole."""
        with self.transaction() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise self._newer_schema(version)
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _statements(MIGRATIONS[target - 1]):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {target}")

    # -- conversations ------------------------------------------------------------------------
    def has_conversation(self, conv_id: str) -> bool:
        return bool(self._query("SELECT 1 FROM conversations WHERE id = ?", (conv_id,)))

    def _require(self, conv_id: str) -> None:
        if not self.has_conversation(conv_id):
            raise ConversationNotFound(f"no conversation {conv_id!r} in {self.path}")

    def save_conversation(
        self,
        conv_id: str,
        turns: Sequence[Turn],
        pages: Sequence[Page],
        probes: Sequence[Probe] = (),
        settings: dict[str, Any] | None = None,
        source: str | None = None,
        meta: dict[str, Any] | None = None,
        replace: bool = False,
    ) -> None:
        """Store a whole conversation in one transaction; an existing id is an error unless ``replace``."""
        _check_conversation(self.path, conv_id, turns, probes)
        with self.transaction() as conn:
            exists = conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conv_id,)).fetchone()
            if exists and not replace:
                raise StoreError(f"conversation {conv_id!r} already exists in {self.path}")
            if exists:  # what is replaced goes: other processes must not keep serving or saving it
                _count_erasure(conn)
            conn.execute("DELETE FROM conversations WHERE id = ?", (conv_id,))
            conn.execute(
                "INSERT INTO conversations (id, source, settings, meta, created_at) VALUES (?, ?, ?, ?, ?)",
                (conv_id, source, json.dumps(settings or {}), json.dumps(meta or {}), time.time()),
            )
            conn.executemany(
                "INSERT INTO turns (conv_id, idx, role, text, time, speaker) VALUES (?, ?, ?, ?, ?, ?)",
                [(conv_id, t.index, t.role, t.text, t.time, t.speaker) for t in turns],
            )
            self._write_pages(conn, conv_id, pages)
            conn.executemany(
                "INSERT INTO probes (conv_id, idx, question, answers, evidence, type, at, extra)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (conv_id, i, p.question, json.dumps(p.answers), json.dumps(p.evidence), p.type, p.at,
                     json.dumps(p.extra))
                    for i, p in enumerate(probes)
                ],
            )

    def create_conversation(self, conv_id: str, settings: dict[str, Any] | None = None) -> None:
        """An empty conversation, e.g. for a new chat."""
        self.save_conversation(conv_id, [], [], settings=settings)

    def delete_conversation(self, conv_id: str) -> None:
        self._require(conv_id)
        with self.transaction() as conn:
            _count_erasure(conn)
            conn.execute("DELETE FROM conversations WHERE id = ?", (conv_id,))

    def settings(self, conv_id: str) -> dict[str, Any]:
        rows = self._query("SELECT settings FROM conversations WHERE id = ?", (conv_id,))
        if not rows:
            raise ConversationNotFound(f"no conversation {conv_id!r} in {self.path}")
        return json.loads(rows[0][0])

    def list_conversations(self) -> list[ConversationInfo]:
        rows = self._query(
            """
            SELECT c.id, c.source, c.settings,
                (SELECT COUNT(*) FROM turns t WHERE t.conv_id = c.id),
                (SELECT COUNT(*) FROM pages p WHERE p.conv_id = c.id),
                (SELECT COUNT(*) FROM pages p WHERE p.conv_id = c.id AND p.evicted),
                (SELECT COUNT(*) FROM probes q WHERE q.conv_id = c.id)
            FROM conversations c ORDER BY c.created_at, c.id
            """
        )
        return [
            ConversationInfo(id=r[0], source=r[1], settings=json.loads(r[2]), turns=r[3], pages=r[4],
                             evicted=r[5], probes=r[6])
            for r in rows
        ]

    # -- turns, pages, probes -----------------------------------------------------------------
    def turns(self, conv_id: str) -> list[Turn]:
        self._require(conv_id)
        rows = self._query(
            "SELECT idx, role, text, time, speaker, superseded_by FROM turns WHERE conv_id = ? ORDER BY idx",
            (conv_id,),
        )
        return [Turn(index=r[0], role=r[1], text=r[2], time=r[3], speaker=r[4], superseded_by=r[5]) for r in rows]

    def pages(self, conv_id: str, turns: Sequence[Turn] | None = None) -> list[Page]:
        """The pages of a conversation, with their text rendered from ``turns`` (loaded if not given)."""
        turns = self.turns(conv_id) if turns is None else turns
        rows = self._query(
            "SELECT page_id, first_turn, last_turn, token_count, keywords, access_count, last_access,"
            " pinned, evicted, keywords_by, worth FROM pages WHERE conv_id = ? ORDER BY page_id",
            (conv_id,),
        )
        return [
            Page(page_id=r[0], first_turn=r[1], last_turn=r[2], token_count=r[3], keywords=json.loads(r[4]),
                 access_count=r[5], last_access=r[6], pinned=bool(r[7]), evicted=bool(r[8]),
                 keywords_by=r[9], worth=None if r[10] is None else bool(r[10]),
                 text="\n".join(t.render() for t in turns[r[1] : r[2] + 1] if t.text))  # not forgotten
            for r in rows
        ]

    def probes(self, conv_id: str) -> list[Probe]:
        self._require(conv_id)
        rows = self._query(
            "SELECT question, answers, evidence, type, at, extra FROM probes WHERE conv_id = ? ORDER BY idx",
            (conv_id,),
        )
        return [
            Probe(question=r[0], answers=json.loads(r[1]), evidence=json.loads(r[2]), type=r[3], at=r[4],
                  extra=json.loads(r[5]))
            for r in rows
        ]

    @staticmethod
    def _write_pages(conn: sqlite3.Connection, conv_id: str, pages: Sequence[Page]) -> None:
        conn.executemany(
            # an upsert, not INSERT OR REPLACE: a replace deletes the row first (firing delete triggers and
            # any cascade) and would silently drop columns this statement does not name
            "INSERT INTO pages (conv_id, page_id, first_turn, last_turn, token_count, keywords,"
            " access_count, last_access, pinned, evicted, keywords_by, worth)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (conv_id, page_id) DO UPDATE SET first_turn = excluded.first_turn,"
            " last_turn = excluded.last_turn, token_count = excluded.token_count, keywords = excluded.keywords,"
            " access_count = excluded.access_count, last_access = excluded.last_access, pinned = excluded.pinned,"
            " evicted = excluded.evicted, keywords_by = excluded.keywords_by, worth = excluded.worth",
            [
                (conv_id, p.page_id, p.first_turn, p.last_turn, p.token_count, json.dumps(p.keywords),
                 p.access_count, p.last_access, int(p.pinned), int(p.evicted), p.keywords_by,
                 None if p.worth is None else int(p.worth))
                for p in pages
            ],
        )

    def append_turn(self, conv_id: str, turn: Turn, pages: Sequence[Page] = (), *, unanswered: bool = False,
                    answers: tuple[int, dict[str, Any]] | None = None) -> int:
        """Make ``turn`` durable, with the pages it changed, in one transaction; returns the conversation's
        generation after it.

        The turn's index is checked inside the write transaction: it must be the next one, or another
        writer got there first and the caller's pages are stale (``ConversationChanged``, nothing stored).
        ``unanswered`` stores, with a question, a trace saying it has no answer yet; ``answers`` =
        (question's turn, trace) replaces that trace with the answer's, with the answer, in the same
        transaction: a process killed in between leaves the question marked unanswered."""
        check_text(turn.text)
        for what, value in (("turn time", turn.time), ("turn speaker", turn.speaker)):
            if value is not None:
                check_text(value, what)
        with self.transaction() as conn:
            row = conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conv_id,)).fetchone()
            if row is None:
                raise ConversationNotFound(f"no conversation {conv_id!r} in {self.path}")
            expected = conn.execute("SELECT COALESCE(MAX(idx) + 1, 0) FROM turns WHERE conv_id = ?",
                                    (conv_id,)).fetchone()[0]
            if turn.index != expected:
                raise ConversationChanged(
                    f"conversation {conv_id!r} changed in another process (turn {turn.index} is not next: "
                    f"{expected} is); open it again")
            conn.execute(
                "INSERT INTO turns (conv_id, idx, role, text, time, speaker) VALUES (?, ?, ?, ?, ?, ?)",
                (conv_id, turn.index, turn.role, turn.text, turn.time, turn.speaker),
            )
            self._write_pages(conn, conv_id, pages)
            if unanswered:
                conn.execute("INSERT INTO traces (conv_id, turn_idx, created_at, data) VALUES (?, ?, ?, ?)",
                             (conv_id, turn.index, time.time(),
                              json.dumps({"question": turn.text, "status": UNANSWERED})))
            if answers is not None:
                question_idx, trace = answers
                self._replace_unanswered(conn, conv_id, question_idx, trace)
            return conn.execute("SELECT generation FROM conversations WHERE id = ?", (conv_id,)).fetchone()[0]

    @staticmethod
    def _replace_unanswered(conn: sqlite3.Connection, conv_id: str, question_idx: int, data: dict[str, Any]) -> None:
        """The unanswered trace of ``question_idx`` becomes ``data`` (a new trace if there is none)."""
        cur = conn.execute(
            "UPDATE traces SET data = ?, created_at = ? WHERE conv_id = ? AND turn_idx = ?"
            " AND json_extract(data, '$.status') = ?",
            (json.dumps(data), time.time(), conv_id, question_idx, UNANSWERED))
        if cur.rowcount == 0:
            conn.execute("INSERT INTO traces (conv_id, turn_idx, created_at, data) VALUES (?, ?, ?, ?)",
                         (conv_id, question_idx, time.time(), json.dumps(data)))

    def unanswered(self, conv_id: str) -> list[int]:
        """The turns of questions stored with no answer yet: still being answered, or never to be (the
        process answering them died, or the model failed)."""
        rows = self._query("SELECT turn_idx FROM traces WHERE conv_id = ? AND json_extract(data, '$.status') = ?"
                           " ORDER BY id", (conv_id, UNANSWERED))
        return [r[0] for r in rows]

    def mark_interrupted(self, conv_id: str, reason: str, note: Turn | None = None,
                         pages: Sequence[Page] = ()) -> int:
        """Every unanswered question of the conversation is marked ``interrupted`` (with ``reason``), and
        ``note`` (an assistant turn saying no answer came) appended with its pages, in one transaction.
        Returns the conversation's generation after it."""
        with self.transaction() as conn:
            rows = conn.execute("SELECT id, data FROM traces WHERE conv_id = ? AND json_extract(data, '$.status') = ?",
                                (conv_id, UNANSWERED)).fetchall()
            for trace_id, data in rows:
                conn.execute("UPDATE traces SET data = ? WHERE id = ?",
                             (json.dumps({**json.loads(data), "status": INTERRUPTED, "reason": reason}), trace_id))
            if note is not None:
                expected = conn.execute("SELECT COALESCE(MAX(idx) + 1, 0) FROM turns WHERE conv_id = ?",
                                        (conv_id,)).fetchone()[0]
                if note.index != expected:
                    raise ConversationChanged(f"conversation {conv_id!r} changed in another process; open it again")
                conn.execute("INSERT INTO turns (conv_id, idx, role, text, time, speaker) VALUES (?, ?, ?, ?, ?, ?)",
                             (conv_id, note.index, note.role, note.text, note.time, note.speaker))
                self._write_pages(conn, conv_id, pages)
            return conn.execute("SELECT generation FROM conversations WHERE id = ?", (conv_id,)).fetchone()[0]

    def generation(self, conv_id: str) -> int:
        """Changes whenever the conversation's turns, pages, vectors or settings change (see migration 6)."""
        rows = self._query("SELECT generation FROM conversations WHERE id = ?", (conv_id,))
        if not rows:
            raise ConversationNotFound(f"no conversation {conv_id!r} in {self.path}")
        return rows[0][0]

    def erase_generation(self) -> int:
        """How many erasures (forgets, deleted or replaced conversations) the store has seen: memory a
        process built under a smaller count may hold text that is gone (see migration 7)."""
        return self._counter("erasures")

    def erase_pending(self) -> bool:
        """Whether deleted text may still be in the store's files: their rewrite could not finish (another
        process was reading the store) or never ran (the process died first). ``erase`` finishes it."""
        return bool(self._counter("erase_pending"))

    def _counter(self, name: str) -> int:
        rows = self._query("SELECT value FROM counters WHERE name = ?", (name,))
        return rows[0][0] if rows else 0

    def update_pages(self, conv_id: str, pages: Sequence[Page]) -> None:
        self._require(conv_id)
        with self.transaction() as conn:
            self._write_pages(conn, conv_id, pages)

    def update_settings(self, conv_id: str, settings: dict[str, Any]) -> None:
        self._require(conv_id)
        with self.transaction() as conn:
            conn.execute("UPDATE conversations SET settings = ? WHERE id = ?", (json.dumps(settings), conv_id))

    # -- traces -------------------------------------------------------------------------------
    def add_trace(self, conv_id: str, turn_idx: int, data: dict[str, Any]) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO traces (conv_id, turn_idx, created_at, data) VALUES (?, ?, ?, ?)",
                (conv_id, turn_idx, time.time(), json.dumps(data)),
            )

    def traces(self, conv_id: str) -> list[dict[str, Any]]:
        self._require(conv_id)
        rows = self._query("SELECT turn_idx, created_at, data FROM traces WHERE conv_id = ? ORDER BY id", (conv_id,))
        return [{"turn": r[0], "created_at": r[1], **json.loads(r[2])} for r in rows]

    # -- embeddings ---------------------------------------------------------------------------
    def save_embeddings(self, rows: Sequence[tuple[str, int, str, str, str, bytes]]) -> tuple[int, int]:
        """Rows of (conv_id, page_id, kind, model, source text, float32 vector bytes). A replaced row gets
        a new rowid (what a loaded FAISS index keys on). Returns the ``embeddings`` change count before and
        after, read in the same transaction: an index that was current at ``before`` is current at
        ``after`` once it has these rows; otherwise another process changed vectors too."""
        with self.transaction() as conn:
            before = conn.execute("SELECT value FROM counters WHERE name = 'embeddings'").fetchone()[0]
            conn.executemany(
                "INSERT OR REPLACE INTO embeddings (conv_id, page_id, kind, model, source, vector)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            after = conn.execute("SELECT value FROM counters WHERE name = 'embeddings'").fetchone()[0]
        return before, after

    def embeddings_version(self) -> int:
        """The store's ``embeddings`` change count: moves with every vector added, replaced or deleted."""
        return self._query("SELECT value FROM counters WHERE name = 'embeddings'")[0][0]

    def embedding_rows(self, signal: str, conv_id: str | None = None, page_ids: Sequence[int] | None = None,
                       vectors: bool = True) -> list[tuple]:
        """(rowid, conv_id, page_id, kind, model, source text[, vector]) of a signal: ``bookmark``, ``text``
        or ``turn`` (kinds ``turn:<index>``; ``retrieval.choices.Signal``), optionally of one conversation's pages. ``vectors=False``
        leaves the vectors out: checking what is stale, or which rows to search, needs no vectors."""
        columns = "rowid, conv_id, page_id, kind, model, source" + (", vector" if vectors else "")
        sql = f"SELECT {columns} FROM embeddings WHERE " + _signal_sql()
        args: list[Any] = [signal, signal]
        if conv_id is not None:
            sql += " AND conv_id = ?"
            args.append(conv_id)
        if page_ids is not None:
            sql += f" AND page_id IN ({','.join('?' * len(page_ids))})"
            args.extend(page_ids)
        return [tuple(r) for r in self._query(sql + " ORDER BY rowid", args)]

    def embedding_keys(self, signal: str) -> list[tuple[int, str, int, str]]:
        """(rowid, conv_id, page_id, kind) of every row of a signal, by rowid: what a FAISS index read from
        its file needs to know of its rows (``embedding_rows`` without the source texts: half the time)."""
        return [tuple(r) for r in self._query("SELECT rowid, conv_id, page_id, kind FROM embeddings WHERE "
                                              + _signal_sql() + " ORDER BY rowid", (signal, signal))]

    def embedded_turn_counts(self, conv_id: str, model: str) -> dict[int, int]:
        """How many turn vectors of ``model`` each page of a conversation has: one query where reading every
        row's source would take a second at 100,000 turns (``PageIndex.update``'s first look)."""
        rows = self._query("SELECT page_id, COUNT(*) FROM embeddings WHERE conv_id = ? AND kind LIKE 'turn:%'"
                           " AND model = ? GROUP BY page_id", (conv_id, model))
        return {int(r[0]): int(r[1]) for r in rows}

    def embedding_fingerprint(self, signal: str) -> list[Any]:
        """Changes whenever a row of the signal is added, replaced or deleted, even when a delete and a
        re-insert leave the count and the rowids as they were: tells a saved index is stale."""
        count = self._query("SELECT COUNT(*) FROM embeddings WHERE " + _signal_sql(), (signal, signal))[0][0]
        changes = self._query("SELECT value FROM counters WHERE name = 'embeddings'")[0][0]
        return [changes, count]

    # -- forgetting, corrections and interchange ----------------------------------------------
    def owned_files(self) -> list[Path]:
        """Every file of this store on disk: the database, its journals, and what is derived beside it
        (FAISS indexes, their metadata and temporary files). What an erase check reads."""
        import glob

        base = self.path
        files = [base, *(Path(f"{base}{suffix}") for suffix in ("-wal", "-shm", "-journal"))]
        files += sorted(base.parent.glob(glob.escape(base.name) + ".*"))
        return [f for f in dict.fromkeys(files) if f.is_file()]

    def conversation_record(self, conv_id: str) -> dict[str, Any]:
        """A conversation's own row: source, settings, meta, created_at."""
        rows = self._query("SELECT source, settings, meta, created_at FROM conversations WHERE id = ?", (conv_id,))
        if not rows:
            raise ConversationNotFound(f"no conversation {conv_id!r} in {self.path}")
        r = rows[0]
        return {"source": r[0], "settings": json.loads(r[1]), "meta": json.loads(r[2]), "created_at": r[3]}

    def probe_rows(self, conv_id: str) -> list[tuple[int, Probe]]:
        """(row index, probe) of a conversation's probes: rows forgetting may delete."""
        rows = self._query("SELECT idx FROM probes WHERE conv_id = ? ORDER BY idx", (conv_id,))
        return list(zip([r[0] for r in rows], self.probes(conv_id)))

    def trace_rows(self, conv_id: str) -> list[tuple[int, int, dict[str, Any]]]:
        """(row id, turn, data) of every stored trace of a conversation: what forgetting scrubs."""
        rows = self._query("SELECT id, turn_idx, data FROM traces WHERE conv_id = ? ORDER BY id", (conv_id,))
        return [(r[0], r[1], json.loads(r[2])) for r in rows]

    def forget_turns(self, conv_id: str, turns: Sequence[int], pages: Sequence[Page], *,
                     drop_traces: Sequence[int] = (), rewrite_traces: dict[int, dict[str, Any]] | None = None,
                     drop_probes: Sequence[int] = ()) -> tuple[int, bool]:
        """Blank ``turns`` (their places stay: indices and pages do not move), store ``pages`` (their
        keywords rebuilt from what is left), delete the turns' vectors and the pages' bookmark and text
        vectors, and drop or rewrite traces and probes, in one transaction; then ``erase``. Returns the
        number of vectors deleted and whether the erase was complete."""
        self._require(conv_id)
        forgotten = sorted(set(turns))
        with self._lock:
            self._secure_delete()
            with self.transaction() as conn:
                _count_erasure(conn)
                conn.executemany("UPDATE turns SET text = '', superseded_by = NULL WHERE conv_id = ? AND idx = ?",
                                 [(conv_id, i) for i in forgotten])
                # a forgotten correction no longer replaces what it corrected
                conn.executemany("UPDATE turns SET superseded_by = NULL WHERE conv_id = ? AND superseded_by = ?",
                                 [(conv_id, i) for i in forgotten])
                vectors = conn.executemany("DELETE FROM embeddings WHERE conv_id = ? AND kind = ?",
                                           [(conv_id, f"turn:{i}") for i in forgotten]).rowcount
                vectors += conn.executemany(
                    "DELETE FROM embeddings WHERE conv_id = ? AND page_id = ? AND kind IN ('bookmark', 'text')",
                    [(conv_id, p.page_id) for p in pages]).rowcount
                self._write_pages(conn, conv_id, pages)
                conn.executemany("DELETE FROM traces WHERE id = ?", [(i,) for i in drop_traces])
                conn.executemany("UPDATE traces SET data = ? WHERE id = ?",
                                 [(json.dumps(d), i) for i, d in (rewrite_traces or {}).items()])
                conn.executemany("DELETE FROM probes WHERE conv_id = ? AND idx = ?",
                                 [(conv_id, i) for i in drop_probes])
        return vectors, self.erase()

    def forget_conversation(self, conv_id: str) -> bool:
        """Delete a conversation with everything of it (turns, pages, probes, traces, vectors), then erase."""
        self._require(conv_id)
        with self._lock:
            self._secure_delete()
            with self.transaction() as conn:
                _count_erasure(conn)
                conn.execute("DELETE FROM conversations WHERE id = ?", (conv_id,))
        return self.erase()

    def _secure_delete(self) -> None:
        """Before a delete of text: deleted cells are zeroed, not left on free pages."""
        self._conn.execute("PRAGMA secure_delete=ON")

    def erase(self) -> bool:
        """Make deleted content unrecoverable from the store's files: the WAL copied back and truncated to
        nothing, and the database rebuilt without free pages (VACUUM, in memory, so no copy lands in a temp
        file). False when another connection's reader kept the WAL from being truncated: the store then
        records that a rewrite is pending (``erase_pending``), and the next ``erase`` finishes it."""
        with self._lock:
            conn = self._conn
            conn.execute("PRAGMA secure_delete=ON")
            conn.execute("PRAGMA temp_store=MEMORY")
            waited = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]  # waits for readers
            conn.execute("VACUUM")
            # VACUUM may renumber the vectors' rowids and fires no trigger: every loaded FAISS index, in any
            # process, must see that it is stale
            conn.execute("UPDATE counters SET value = value + 1 WHERE name = 'embeddings'")
            if waited:  # a reader outlasted the wait: waiting as long again would not help
                conn.execute("PRAGMA busy_timeout=0")
            try:
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            finally:
                conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            conn.execute("UPDATE counters SET value = ? WHERE name = 'erase_pending'", (1 if busy else 0,))
            if not busy:  # the WAL holds only that counter now: truncated again, so it is left empty
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            return not busy

    def set_superseded(self, conv_id: str, marks: dict[int, int | None], pages: Sequence[Page] = ()) -> None:
        """Mark turns as corrected by later ones (``{old: new}``; None clears a mark), with the pages whose
        keywords changed because of it, in one transaction."""
        self._require(conv_id)
        with self.transaction() as conn:
            conn.executemany("UPDATE turns SET superseded_by = ? WHERE conv_id = ? AND idx = ?",
                             [(new, conv_id, old) for old, new in marks.items()])
            self._write_pages(conn, conv_id, pages)

    def conversation_embeddings(self, conv_id: str) -> list[tuple[int, str, str, str, bytes]]:
        """(page_id, kind, model, source text, vector) of every vector of a conversation, for export."""
        rows = self._query("SELECT page_id, kind, model, source, vector FROM embeddings WHERE conv_id = ?"
                           " ORDER BY rowid", (conv_id,))
        return [tuple(r) for r in rows]


def _count_erasure(conn: sqlite3.Connection) -> None:
    """In the transaction that deletes text: the store's erase generation moves on, so every process
    drops what it holds of the text, and a rewrite of the files is pending until ``Store.erase`` ends."""
    conn.execute("UPDATE counters SET value = value + 1 WHERE name = 'erasures'")
    conn.execute("UPDATE counters SET value = 1 WHERE name = 'erase_pending'")


def _check_conversation(path: Path, conv_id: str, turns: Sequence[Turn], probes: Sequence[Probe]) -> None:
    """Everything SQLite could not store, or a listing could not show, as one StoreError before any write."""
    try:
        check_id(conv_id)
        for i, t in enumerate(turns):
            for what, value in (("text", t.text), ("time", t.time), ("speaker", t.speaker)):
                if value is not None:
                    check_text(value, f"turn {i} {what}")
        for i, probe in enumerate(probes):
            for value in (probe.question, *probe.answers):
                check_text(value, f"probe {i}")
    except ValueError as exc:
        raise StoreError(f"cannot store conversation {conv_id!r} in {path}: {exc}") from None


def _statements(script: str) -> Iterator[str]:
    """The statements of a migration, whole: a trigger's body holds semicolons of its own."""
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n\t;"):
                yield pending.strip()
            pending = ""
    if pending.strip(" \n\t;"):
        raise ValueError(f"incomplete statement in a migration: {pending.strip()[:60]!r}")


def _read_only_uri(path: Path) -> str:
    """A read-only SQLite URI. Without a WAL file beside it the database is opened immutable, so SQLite
    creates no ``-wal``/``-shm`` files (they would take the database's read-only permissions)."""
    from urllib.parse import quote

    wal = Path(f"{path}-wal").exists()
    return f"file:{quote(str(path.resolve()))}?mode=ro" + ("" if wal else "&immutable=1")


def _signal_sql() -> str:
    """The rows of one signal: its own kind (``text``) or its kind with an index (``turn:12``)."""
    return "(kind = ? OR kind LIKE ? || ':%')"
