"""The store on PostgreSQL, for many ``serve`` replicas over one database (``--store
postgresql://USER@HOST:PORT/DB``; extra ``postgres``: psycopg 3 and psycopg-pool). A ``base.Store``, beside
``sqlite.SQLiteStore``.

The interface's SQL runs here unchanged, through a connection that speaks
PostgreSQL's placeholders and the few phrases where the engines differ (``PHRASES``); the schema and its
migrations are the same list (``schema.py``), run once per schema under an advisory lock. What differs is
the plumbing around them:

- connections come from a pool (threads of one process, and any number of processes, write at once);
  every change is one transaction, as on SQLite;
- a conversation's writers serialise through a per-conversation advisory lock (``locks.AdvisoryLock``) held
  on a connection of its own; PostgreSQL releases it when the holder's connection ends, a process killed
  with SIGKILL included, as the operating system releases a file lock;
- a conversation's ``generation`` comes from a sequence and its vectors have their own version
  (``conversations.vectors``), so a replica notices another replica's change to one conversation without a
  row that every writer of every conversation would have to update;
- nothing lives beside the store: FAISS indexes are built in memory from the rows, one per conversation
  (``retrieval/index.py``), and no KV cache is saved (the model server keeps its own);
- ``erase`` rewrites the tables (``VACUUM FULL``): after a forget no file under the cluster's ``base/``
  folder holds the text. What PostgreSQL keeps elsewhere (write-ahead log, backups, standbys) is
  ``WAL_NOTE``, printed by ``forget`` and stated in docs/deployment.md.

A namespace (``namespace``) is a schema of its own in the same database, with its own tables, counters
and locks: a store opened for one namespace cannot name another's rows.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Iterator, Sequence

from .naming import check_namespace
from .schema import migrations
from .base import (
    BUSY_TIMEOUT_MS,
    SCHEMA_VERSION,
    ConversationChanged,
    ConversationNotFound,
    Store,
    StoreBusy,
    StoreError,
    signal_sql,
)

log = logging.getLogger("localpager")
MISSING_EXTRA = "a PostgreSQL store needs psycopg: pip install 'localpager[postgres]'"
DEFAULT_SCHEMA = "localpager"
NAMESPACE_PREFIX = "localpager_ns_"
POOL_SIZE = int(os.environ.get("LOCALPAGER_PG_POOL", "8"))  # connections for queries, per process and database
LOCK_POOL_SIZE = 16  # connections that hold conversation locks (one per conversation being changed)
CONNECT_TIMEOUT = 10  # seconds
PG_MIGRATIONS = migrations("postgresql")
# The tables a forget's text can be in: rewritten whole by ``erase``.
ERASED_TABLES = ("turns", "pages", "facts", "embeddings", "traces", "probes", "conversations")
WAL_NOTE = ("PostgreSQL keeps what it wrote in its write-ahead log (pg_wal) until those segments are recycled, "
            "and in WAL archives, base backups and standbys until they are rotated: see docs/deployment.md")
KEY_NOTE = ("a PostgreSQL store is not encrypted by localpager (--key-env, key=...): encryption at rest is the "
            "database's or its disk's job (see docs/deployment.md)")

# SQLite's words in the SQL the store shares, and PostgreSQL's for them.
PHRASES = {
    "json_extract(data, '$.status')": "(data::jsonb ->> 'status')",
    "AND p.evicted)": "AND p.evicted <> 0)",  # an INTEGER is no boolean in PostgreSQL
    " IN ()": " IN (NULL)",  # an empty list: SQLite takes it, PostgreSQL wants a value (NULL matches nothing)
}


@lru_cache(maxsize=512)
def pg_sql(sql: str) -> str:
    """The store's SQL in PostgreSQL's words: ``PHRASES``, then ``?`` placeholders as ``%s`` (and a literal
    ``%`` doubled). Every statement is run with a parameter sequence, so the doubling is always undone."""
    for sqlite_words, pg_words in PHRASES.items():
        sql = sql.replace(sqlite_words, pg_words)
    return sql.replace("%", "%%").replace("?", "%s")


def _driver():
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        raise StoreError(MISSING_EXTRA) from None
    return psycopg, psycopg_pool


def display_url(url: str) -> str:
    """The URL as messages show it: never the password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - a URL psycopg cannot read: say so when connecting
        return re.sub(r"//[^@/]*@", "//…@", url)
    user = f"{info['user']}@" if info.get("user") else ""
    host = info.get("host") or "localhost"
    host = f"[{host}]" if ":" in host else host
    port = f":{info['port']}" if info.get("port") else ""
    return f"postgresql://{user}{host}{port}/{info.get('dbname') or ''}"


def lock_key(schema: str, what: str) -> int:
    """A signed 64-bit advisory lock key for ``what`` in ``schema`` (a hash: ids may hold any text)."""
    digest = hashlib.sha256(f"localpager\0{schema}\0{what}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def namespace_schema(name: str) -> str:
    """The schema of namespace ``name`` (lower-case letters, digits and ``_``, up to 40)."""
    return NAMESPACE_PREFIX + check_namespace(name)


class _Statements:
    """A connection inside a transaction, as the SQLite store's code uses one: ``execute`` and
    ``executemany`` with ``?`` placeholders, returning a cursor (``fetchone``, ``fetchall``, ``rowcount``)."""

    def __init__(self, conn):
        self._conn = conn

    def execute(self, sql: str, args: Sequence[Any] = ()):
        return self._conn.execute(pg_sql(sql), tuple(args))

    def executemany(self, sql: str, rows):
        rows = [tuple(r) for r in rows]
        cur = self._conn.cursor()
        if rows:
            cur.executemany(pg_sql(sql), rows)
        return _Count(cur.rowcount if rows else 0)


class _Count:
    def __init__(self, rowcount: int):
        self.rowcount = max(rowcount, 0)


class _Pools:
    """The connections of one database, shared by the stores of its namespaces: ``queries`` for statements
    and transactions, ``locks`` for connections that hold a conversation's advisory lock."""

    def __init__(self, url: str, shown: str):
        psycopg, psycopg_pool = _driver()
        try:  # one direct connection first: a wrong URL, password or host is one clear line, not a pool timeout
            psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT).close()
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to store {shown}: {_first_line(exc)}") from None

        def configure(conn) -> None:
            conn.execute(f"SET lock_timeout = {BUSY_TIMEOUT_MS}")  # as SQLite's busy_timeout

        def unlock_all(conn) -> None:  # a lock connection goes back to the pool holding nothing
            conn.execute("SELECT pg_advisory_unlock_all()")

        kwargs = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT}
        self.queries = psycopg_pool.ConnectionPool(url, min_size=1, max_size=POOL_SIZE, kwargs=kwargs,
                                                   configure=configure, open=True, name="localpager")
        self.locks = psycopg_pool.ConnectionPool(url, min_size=0, max_size=LOCK_POOL_SIZE, kwargs=kwargs,
                                                 reset=unlock_all, open=True, name="localpager-locks")
        self.users = 0
        self._guard = threading.Lock()

    def take(self) -> None:
        with self._guard:
            self.users += 1

    def give_back(self) -> None:
        with self._guard:
            self.users -= 1
            last = self.users == 0
        if last:
            self.queries.close()
            self.locks.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class PostgresStore(Store):
    """A PostgreSQL page store holding many conversations (one schema: one namespace). Thread-safe: every
    call takes a pooled connection."""

    kind = "postgresql"
    local = False  # a database server: nothing is kept beside it
    encrypted = False
    read_only = False

    def __init__(self, url: str, *, key: str | None = None, schema: str = DEFAULT_SCHEMA, create: bool = True,
                 pools: _Pools | None = None):
        if key is not None:
            raise StoreError(KEY_NOTE)
        self.psycopg, _ = _driver()
        self.url = url
        self.schema = schema
        shown = display_url(url)
        self.path = shown if schema == DEFAULT_SCHEMA else f"{shown} (namespace {schema[len(NAMESPACE_PREFIX):]})"
        self._lock = threading.RLock()
        self._closed = False
        self._pools = pools or _Pools(url, shown)
        self._pools.take()
        self._namespaces: dict[str, PostgresStore] = {}
        try:
            self._set_up(create)
        except BaseException:
            self.close()
            raise

    # -- plumbing -----------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            children, self._namespaces = list(self._namespaces.values()), {}
        for child in children:
            child.close()
        self._pools.give_back()

    @contextmanager
    def _connection(self, search_path: bool = True) -> Iterator[Any]:
        """A pooled connection (autocommit) whose ``search_path`` is this store's schema alone."""
        if self._closed:
            raise StoreError(f"store {self.path} is closed")
        psycopg = self.psycopg
        try:
            with self._pools.queries.connection(timeout=CONNECT_TIMEOUT + BUSY_TIMEOUT_MS / 1000) as conn:
                if search_path and getattr(conn, "_localpager_schema", None) != self.schema:
                    conn.execute(psycopg.sql.SQL("SET search_path TO {}").format(psycopg.sql.Identifier(self.schema)))
                    conn._localpager_schema = self.schema
                yield conn
        except psycopg.Error as exc:
            raise self._error(exc) from None
        except self._pool_timeout() as exc:
            raise StoreBusy(f"store {self.path} is busy: no database connection was free for "
                            f"{CONNECT_TIMEOUT + BUSY_TIMEOUT_MS // 1000} s ({_first_line(exc)}); try again") from None

    def _pool_timeout(self):
        from psycopg_pool import PoolTimeout

        return PoolTimeout

    @contextmanager
    def transaction(self) -> Iterator[_Statements]:
        """One atomic change: committed whole on success, rolled back whole on any error."""
        with self._connection() as conn:
            with conn.transaction():
                yield _Statements(conn)

    def _generation_held(self, conn, conv_id: str) -> int | None:
        """The conversation's generation, its row locked until this transaction ends: every other writer of the
        conversation (whose triggers update that row) waits, so what this transaction found stays true."""
        row = conn.execute("SELECT generation FROM conversations WHERE id = ? FOR UPDATE", (conv_id,)).fetchone()
        return None if row is None else row[0]

    def _error(self, exc: BaseException) -> StoreError:
        """A one-line StoreError naming the store for what PostgreSQL reported."""
        errors = self.psycopg.errors
        text = _first_line(exc)
        if isinstance(exc, (errors.LockNotAvailable, errors.QueryCanceled, errors.DeadlockDetected)):
            return StoreBusy(f"store {self.path} is busy: another process kept it locked for "
                             f"{BUSY_TIMEOUT_MS // 1000} s; try again")
        if isinstance(exc, errors.UniqueViolation) and getattr(exc.diag, "table_name", None) == "turns":
            return ConversationChanged(f"a conversation of {self.path} changed in another process (its next turn "
                                       "was taken); open it again")
        if isinstance(exc, errors.ReadOnlySqlTransaction):
            return StoreError(f"store {self.path} is read-only: {text}")
        if isinstance(exc, errors.DiskFull):
            return StoreError(f"cannot write store {self.path}: {text} (is the disk full?); nothing was changed")
        if isinstance(exc, self.psycopg.OperationalError):
            return StoreError(f"cannot reach store {self.path}: {text}")
        if isinstance(exc, self.psycopg.ProgrammingError) and not isinstance(exc, errors.InsufficientPrivilege):
            raise exc  # a bug in a statement: its traceback, not a one-line error
        return StoreError(f"store {self.path}: {text}")

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
        with self._connection() as conn:
            return conn.execute(pg_sql(sql), tuple(args)).fetchall()

    @property
    def schema_version(self) -> int:
        rows = self._query("SELECT version FROM localpager_schema")
        return rows[0][0] if rows else 0

    def _set_up(self, create: bool = True) -> None:
        """The schema's tables, once, by one process: the migrations run in one transaction under an
        advisory lock, and the version is read again under it (a process that waited finds the work done)."""
        sql = self.psycopg.sql
        schema = sql.Identifier(self.schema)
        with self._connection(search_path=False) as conn:
            version = self._version(conn)
            if version > SCHEMA_VERSION:
                raise self._newer_schema(version)
            if version == SCHEMA_VERSION:
                return
            if version == 0 and not create:
                raise StoreError(f"no store at {self.path} (ingest a file or start a chat to create one)")
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(self.schema, "schema"),))
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
                conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(schema))
                conn.execute("CREATE TABLE IF NOT EXISTS localpager_schema (version INTEGER NOT NULL)")
                row = conn.execute("SELECT version FROM localpager_schema").fetchone()
                if row is None:
                    conn.execute("INSERT INTO localpager_schema (version) VALUES (0)")
                version = row[0] if row else 0
                if version > SCHEMA_VERSION:
                    raise self._newer_schema(version)
                for target in range(version + 1, SCHEMA_VERSION + 1):
                    conn.execute(PG_MIGRATIONS[target - 1])  # no parameters: one script of many statements
                    conn.execute("UPDATE localpager_schema SET version = %s", (target,))

    def _version(self, conn) -> int:
        table = f"{self.psycopg.sql.Identifier(self.schema).as_string(conn)}.localpager_schema"
        if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is None:
            return 0
        row = conn.execute(f"SELECT version FROM {table}").fetchone()
        return row[0] if row else 0

    def namespace(self, name: str) -> "PostgresStore":
        """The store of namespace ``name``: a schema of its own in this database (created on first use),
        sharing this store's connections. Closed with this store."""
        schema = namespace_schema(name)
        with self._lock:
            store = self._namespaces.get(name)
            if store is None or store._closed:
                store = self._namespaces[name] = PostgresStore(self.url, schema=schema, pools=self._pools)
            return store

    # -- locks --------------------------------------------------------------------------------
    def advisory_lock(self, what: str, timeout: float, name: str = ""):
        """A lock on ``what`` of this schema, across every process using the database (see ``locks``)."""
        from .locks import AdvisoryLock

        return AdvisoryLock(self._pools.locks, lock_key(self.schema, what), timeout, what=name or what,
                            psycopg=self.psycopg)

    def conversation_lock(self, conv_id: str, timeout: float):
        return self.advisory_lock(f"conversation\0{conv_id}", timeout, f"conversation {conv_id!r}")

    # -- vectors: versions per conversation ----------------------------------------------------
    def save_embeddings(self, rows: Sequence[tuple[str, int, str, str, str, bytes]]) -> tuple[int, int]:
        """As ``Store.save_embeddings``, for the rows of one conversation: its vector version before and
        after, read under a lock on its row (another writer of its vectors waits), so an index current at
        ``before`` is current at ``after`` once it has these rows. A replaced row gets a new rowid."""
        rows = [tuple(r) for r in rows]
        conversations = {r[0] for r in rows}
        if len(conversations) > 1:
            raise ValueError("save_embeddings on PostgreSQL takes the vectors of one conversation at a time")
        if not rows:
            return 0, 0
        conv_id = rows[0][0]
        with self.transaction() as conn:
            row = conn.execute("SELECT vectors FROM conversations WHERE id = ? FOR UPDATE", (conv_id,)).fetchone()
            if row is None:
                raise ConversationNotFound(f"no conversation {conv_id!r} in {self.path}")
            conn.executemany(
                "INSERT INTO embeddings (conv_id, page_id, kind, model, source, vector) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (conv_id, page_id, kind) DO UPDATE SET model = excluded.model,"
                " source = excluded.source, vector = excluded.vector, rowid = nextval('embeddings_rowid_seq')",
                rows)
            after = conn.execute("SELECT vectors FROM conversations WHERE id = ?", (conv_id,)).fetchone()[0]
        return row[0], after

    def embeddings_version(self, conv_id: str | None = None):
        """A conversation's vector version (0: none, or no such conversation); without one, the whole
        schema's (the newest rowid and the number of rows: any insert, replace or delete moves it)."""
        if conv_id is None:
            return list(self._query("SELECT COALESCE(MAX(rowid), 0), COUNT(*) FROM embeddings")[0])
        rows = self._query("SELECT vectors FROM conversations WHERE id = ?", (conv_id,))
        return rows[0][0] if rows else 0

    def embedding_fingerprint(self, signal: str, conv_id: str | None = None) -> list[Any]:
        version = self.embeddings_version(conv_id)  # first: never newer than the count
        sql, args = "SELECT COUNT(*) FROM embeddings WHERE " + signal_sql(), [signal, signal]
        if conv_id is not None:
            sql += " AND conv_id = ?"
            args.append(conv_id)
        return [version, self._query(sql, args)[0][0]]

    # -- erasing ------------------------------------------------------------------------------
    def _secure_delete(self) -> None:
        """Nothing to set: ``erase`` rewrites the tables."""

    def owned_files(self) -> list:
        """No file of this store is on this machine (the database's files are the server's)."""
        return []

    def erase(self) -> bool:
        """Rewrite every table text can be in (``VACUUM FULL``: a new file without the deleted rows and
        their old versions, indexes and TOAST rebuilt, the old file truncated), so no file under the
        cluster's ``base/`` folder holds deleted text. Each rewrite locks its table for its duration; a
        table another session kept locked past the lock timeout leaves the rewrite pending
        (``erase_pending``), and the next ``erase`` finishes it. The write-ahead log is ``WAL_NOTE``."""
        sql = self.psycopg.sql
        done = True
        with self._connection() as conn:
            for table in ERASED_TABLES:
                try:
                    conn.execute(sql.SQL("VACUUM FULL {}").format(sql.Identifier(table)))
                except (self.psycopg.errors.LockNotAvailable, self.psycopg.errors.QueryCanceled) as exc:
                    log.warning("could not rewrite %s of %s now: %s", table, self.path, _first_line(exc))
                    done = False
            conn.execute("UPDATE counters SET value = %s WHERE name = 'erase_pending'", (0 if done else 1,))
        return done

    erase_note = WAL_NOTE
