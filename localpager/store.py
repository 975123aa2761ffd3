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

from .records import Page, Probe, Turn

STORE_ENV = "LOCALPAGER_STORE"

# Each entry moves the schema up one version; never edit an entry that has shipped, add one.
MIGRATIONS: tuple[str, ...] = (
    # 1: conversations, turns, pages, probes
    """
    CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        source TEXT,
        settings TEXT NOT NULL DEFAULT '{}',
        meta TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL
    );
    CREATE TABLE turns (
        conv_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        role TEXT NOT NULL,
        text TEXT NOT NULL,
        time TEXT,
        speaker TEXT,
        PRIMARY KEY (conv_id, idx)
    );
    CREATE TABLE pages (
        conv_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        page_id INTEGER NOT NULL,
        first_turn INTEGER NOT NULL,
        last_turn INTEGER NOT NULL,
        token_count INTEGER NOT NULL,
        keywords TEXT NOT NULL DEFAULT '[]',
        access_count INTEGER NOT NULL DEFAULT 0,
        last_access INTEGER NOT NULL DEFAULT -1,
        pinned INTEGER NOT NULL DEFAULT 0,
        evicted INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (conv_id, page_id)
    );
    CREATE TABLE probes (
        conv_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        question TEXT NOT NULL,
        answers TEXT NOT NULL,
        evidence TEXT NOT NULL,
        type TEXT,
        at INTEGER,
        extra TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (conv_id, idx)
    );
    """,
    # 2: per-turn traces of the runtime
    """
    CREATE TABLE traces (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        conv_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        turn_idx INTEGER NOT NULL,
        created_at REAL NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX traces_conv ON traces(conv_id, id);
    """,
    # 3: embeddings of page bookmarks and texts (the FAISS index is rebuilt from these)
    """
    CREATE TABLE embeddings (
        conv_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        page_id INTEGER NOT NULL,
        kind TEXT NOT NULL,
        model TEXT NOT NULL,
        source TEXT NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (conv_id, page_id, kind)
    );
    """,
    # 4: who chose a page's keywords (model strategies replace their fallback's later), and its worth
    """
    ALTER TABLE pages ADD COLUMN keywords_by TEXT NOT NULL DEFAULT '';
    ALTER TABLE pages ADD COLUMN worth INTEGER;
    """,
    # 5: a corrected turn points at the turn that replaced it (Conversation.correct: newest wins)
    """
    ALTER TABLE turns ADD COLUMN superseded_by INTEGER;
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


class StoreError(RuntimeError):
    """A store that cannot be used as asked (unknown conversation, newer schema, not a database)."""


class ConversationNotFound(StoreError):
    pass


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

    def __init__(self, path: str | os.PathLike | None = None, *, key: str | None = None):
        self.path = Path(path) if path is not None else default_store_path()
        # ``key``: the whole database is encrypted with SQLCipher; derived indexes then stay in memory
        self.encrypted = key is not None
        driver = _driver(key)  # before anything is created: a missing extra leaves no empty file behind
        if not self.path.exists():
            _create_private(self.path)
        self._lock = threading.RLock()
        self._conn = driver.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            if key is not None:
                _unlock(self._conn, key)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA busy_timeout=5000")
            self._migrate()
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
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            cur = self._conn.execute(sql, args)
            return cur.fetchall()

    @property
    def schema_version(self) -> int:
        return self._query("PRAGMA user_version")[0][0]

    def _migrate(self) -> None:
        version = self.schema_version
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"store {self.path} has schema {version}, newer than this localpager ({SCHEMA_VERSION}); upgrade localpager"
            )
        for target in range(version + 1, SCHEMA_VERSION + 1):
            with self.transaction() as conn:
                for statement in MIGRATIONS[target - 1].split(";"):
                    if statement.strip():
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
        with self.transaction() as conn:
            exists = conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conv_id,)).fetchone()
            if exists and not replace:
                raise StoreError(f"conversation {conv_id!r} already exists in {self.path}")
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
            "INSERT OR REPLACE INTO pages (conv_id, page_id, first_turn, last_turn, token_count, keywords,"
            " access_count, last_access, pinned, evicted, keywords_by, worth)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (conv_id, p.page_id, p.first_turn, p.last_turn, p.token_count, json.dumps(p.keywords),
                 p.access_count, p.last_access, int(p.pinned), int(p.evicted), p.keywords_by,
                 None if p.worth is None else int(p.worth))
                for p in pages
            ],
        )

    def append_turn(self, conv_id: str, turn: Turn, pages: Sequence[Page] = ()) -> None:
        """Make ``turn`` durable, with the pages it changed, in one transaction."""
        self._require(conv_id)
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO turns (conv_id, idx, role, text, time, speaker) VALUES (?, ?, ?, ?, ?, ?)",
                (conv_id, turn.index, turn.role, turn.text, turn.time, turn.speaker),
            )
            self._write_pages(conn, conv_id, pages)

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
    def save_embeddings(self, rows: Sequence[tuple[str, int, str, str, str, bytes]]) -> None:
        """Rows of (conv_id, page_id, kind, model, source text, float32 vector bytes)."""
        with self.transaction() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO embeddings (conv_id, page_id, kind, model, source, vector)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )

    def embedding_rows(self, family: str, conv_id: str | None = None, page_ids: Sequence[int] | None = None,
                       vectors: bool = True) -> list[tuple]:
        """(rowid, conv_id, page_id, kind, model, source text[, vector]) of a family: ``bookmark``, ``text``
        or ``turn`` (kinds ``turn:<index>``), optionally of one conversation's pages. ``vectors=False``
        leaves the vectors out: checking what is stale, or which rows to search, needs no vectors."""
        columns = "rowid, conv_id, page_id, kind, model, source" + (", vector" if vectors else "")
        sql = f"SELECT {columns} FROM embeddings WHERE " + _family_sql()
        args: list[Any] = [family, family]
        if conv_id is not None:
            sql += " AND conv_id = ?"
            args.append(conv_id)
        if page_ids is not None:
            sql += f" AND page_id IN ({','.join('?' * len(page_ids))})"
            args.extend(page_ids)
        return [tuple(r) for r in self._query(sql + " ORDER BY rowid", args)]

    def embedding_fingerprint(self, family: str) -> list[Any]:
        """Changes whenever a row of the family is added, replaced or deleted: tells a saved index is stale."""
        row = self._query(
            "SELECT COUNT(*), COALESCE(MAX(rowid), 0), COALESCE(SUM(rowid), 0) FROM embeddings WHERE "
            + _family_sql(), (family, family))[0]
        return list(row)

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
            self._conn.execute("PRAGMA secure_delete=ON")  # deleted cells are zeroed, not left on free pages
            with self.transaction() as conn:
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
            self._conn.execute("PRAGMA secure_delete=ON")
            with self.transaction() as conn:
                conn.execute("DELETE FROM conversations WHERE id = ?", (conv_id,))
        return self.erase()

    def erase(self) -> bool:
        """Make deleted content unrecoverable from the store's files: the WAL copied back and truncated to
        nothing, and the database rebuilt without free pages (VACUUM, in memory, so no copy lands in a temp
        file). False when another connection's reader kept the WAL from being truncated."""
        with self._lock:
            conn = self._conn
            conn.execute("PRAGMA secure_delete=ON")
            conn.execute("PRAGMA temp_store=MEMORY")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            conn.execute("VACUUM")
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
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


def _family_sql() -> str:
    return "(kind = ? OR kind LIKE ? || ':%')"
