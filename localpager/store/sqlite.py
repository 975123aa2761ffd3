"""The store in a SQLite file on this machine: the default, for one user's conversations.

The database file is created readable by its owner only (it holds private conversations), in WAL mode;
``key`` encrypts it whole with SQLCipher (extra ``encrypt``). An erase rewrites the file itself: deleted
cells zeroed, the WAL truncated, the database vacuumed in memory (``erase``). The SQL of conversations,
turns and pages is the interface's (``base.Store``).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from .base import BUSY_TIMEOUT_MS, SCHEMA_VERSION, Store, StoreBusy, StoreError, signal_sql
from .naming import is_url as _looks_like_url
from .schema import migrations

STORE_ENV = "LOCALPAGER_STORE"
ELSEWHERE = f"choose a store in a folder you can write to with --store PATH or {STORE_ENV}"
# Each entry moves the schema up one version; never edit an entry that has shipped, add one (in schema.py:
# one list for SQLite and PostgreSQL, rendered here in SQLite's words, exactly as it always read).
MIGRATIONS: tuple[str, ...] = migrations("sqlite")


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


class SQLiteStore(Store):
    """A SQLite page store: one file, readable by its owner only. Thread-safe: one connection, one lock."""

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
            try:
                _create_private(self.path)
            except OSError as exc:  # a read-only folder or mount, no permission: say where else to put it
                raise StoreError(f"cannot create store {self.path}: {exc.strerror or exc} "
                                 f"({exc.filename or self.path}); {ELSEWHERE}") from None
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

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def namespace(self, name: str) -> SQLiteStore:
        """The store of namespace ``name``: a file of its own beside this one (``<store>.namespaces/NAME.db``);
        an encrypted store has none."""
        if self.encrypted:
            raise StoreError("namespaces (an API keys file) need an unencrypted SQLite store or PostgreSQL: give each "
                             "user an encrypted store of their own instead")
        return SQLiteStore(Path(f"{self.path}.namespaces") / f"{name}.db")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic change: committed whole on success, rolled back whole on any error."""
        with self._lock:
            if self.read_only:
                raise StoreError(f"store {self.path} is read-only (no write permission on it or its folder); to change "
                                 f"anything, {ELSEWHERE}")
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

    def embedding_fingerprint(self, signal: str) -> list[Any]:
        """Changes whenever a row of the signal is added, replaced or deleted, even when a delete and a
        re-insert leave the count and the rowids as they were: tells a saved index is stale."""
        count = self._query("SELECT COUNT(*) FROM embeddings WHERE " + signal_sql(), (signal, signal))[0][0]
        changes = self._query("SELECT value FROM counters WHERE name = 'embeddings'")[0][0]
        return [changes, count]

    def owned_files(self) -> list[Path]:
        """Every file of this store on disk: the database, its journals, and what is derived beside it
        (FAISS indexes, their metadata and temporary files). What an erase check reads."""
        import glob

        base = self.path
        files = [base, *(Path(f"{base}{suffix}") for suffix in ("-wal", "-shm", "-journal"))]
        files += sorted(base.parent.glob(glob.escape(base.name) + ".*"))
        return [f for f in dict.fromkeys(files) if f.is_file()]

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


def remove_empty(path: Path) -> bool:
    """Remove the SQLite store at ``path`` (its file, its journal files and its lock files) when it holds no
    conversation, and say whether it did: what a command that created it leaves when it fails before storing
    anything (``localpager ingest`` of a malformed file into a new store). Call it with the store closed."""
    from .locks import lock_dir

    try:
        conn = sqlite3.connect(_read_only_uri(path), uri=True)
        try:
            if conn.execute("SELECT 1 FROM conversations LIMIT 1").fetchone() is not None:
                return False
        finally:
            conn.close()
    except sqlite3.Error:  # not a store this created (encrypted, or something else): left as it is
        return False
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    locks = lock_dir(path)
    if locks.is_dir() and all(f.suffix == ".lock" for f in locks.iterdir()):
        for f in locks.iterdir():
            f.unlink(missing_ok=True)
        locks.rmdir()
    return True


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


