"""Cross-process locks on files beside the store (the ``filelock`` package: flock on POSIX, msvcrt on Windows).

SQLite serialises single writes, but some work spans several transactions and the model's time: an
``ask`` stores the question, runs the model, then stores the answer. A second ``ask`` on the same
conversation in another process must wait for the first, or its question would take the turn index
the first one's answer needs. The operating system releases these locks when a process dies (even by
``kill -9``), so a crash never leaves a conversation locked. Nothing here imports a POSIX-only module: the
library imports on Windows too.

A PostgreSQL store (``store/postgres.py``) has no folder beside it: its conversations lock with
``AdvisoryLock``, a PostgreSQL advisory lock with the same wait, the same one-line "busy" and the same
release when the holder dies; ``conversation_lock`` picks the flavour the store gives.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import filelock

POLL_SECONDS = 0.05


class LockTimeout(TimeoutError):
    """Another process (or thread) held the lock for longer than we were willing to wait."""


def busy_message(what: str, timeout: float) -> str:
    """The one line a lock that waited in vain says, whichever flavour it is."""
    return (f"{what} is busy (another localpager process or thread is using it); "
            f"waited {timeout:g} s, try again when it has finished")


class _ReentrantLock:
    """Re-entrance within one thread over an exclusive lock that another thread or process waits for: a
    flavour gives ``_take(timeout)`` (get the lock or raise ``LockTimeout``), ``_give()`` (let it go) and
    ``_name`` (what it is, for errors). Only the thread holding it may release it."""

    timeout: float
    _depth: int
    _owner: int | None
    _guard: threading.Lock
    _name: str

    def acquire(self, timeout: float | None = None) -> None:
        me = threading.get_ident()
        with self._guard:
            if self._owner == me:
                self._depth += 1
                return
        self._take(self.timeout if timeout is None else timeout)
        with self._guard:
            self._owner, self._depth = me, 1

    def _check_held(self, action: str) -> None:
        if self._owner != threading.get_ident():
            raise RuntimeError(f"{action} of {self._name} by a thread that does not hold it")

    def release(self) -> None:
        with self._guard:
            self._check_held("release")
            self._depth -= 1
            if self._depth:
                return
            self._owner = None
        self._give()

    def _take(self, timeout: float) -> None:
        raise NotImplementedError

    def _give(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass
class FileLock(_ReentrantLock):
    """An exclusive lock on ``path``, re-entrant within one thread (another thread of this process waits, as
    another process does), waiting up to ``timeout`` seconds. ``what`` names the thing locked, for the
    error message ("conversation 'work' is busy ...")."""

    path: Path
    timeout: float = 60.0
    what: str = ""
    _lock: filelock.FileLock = field(init=False, repr=False)
    _depth: int = field(default=0, init=False, repr=False)
    _owner: int | None = field(default=None, init=False, repr=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self._lock = filelock.FileLock(str(self.path), mode=0o600)

    @property
    def _name(self) -> str:
        return str(self.path)

    def _take(self, timeout: float) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            self._lock.acquire(timeout=timeout, poll_interval=POLL_SECONDS)
        except filelock.Timeout:
            raise LockTimeout(busy_message(self.what or str(self.path), timeout)) from None

    def _give(self) -> None:
        self._lock.release()

    def remove(self) -> None:
        """Delete the lock file, held by this thread (what it locked is gone). ``filelock`` checks, when it gets
        a lock, that the file it locked is still the one at the path, so a process that was waiting on the old
        file locks the path afresh: never two holders at once."""
        with self._guard:
            self._check_held("removal")
            self.path.unlink(missing_ok=True)


def lock_dir(store_path: Path) -> Path:
    """Where a store's lock files live: ``<store>.locks/`` beside it."""
    return Path(f"{store_path}.locks")


def conversation_lock(store, conv_id: str, timeout: float):
    """The lock one conversation's writers take, in the store's flavour: ``store`` is a store
    (``Store.conversation_lock``: a PostgreSQL store gives an ``AdvisoryLock``, a SQLite store a file beside it)
    or a SQLite store's path."""
    if isinstance(store, (str, os.PathLike)):
        return file_conversation_lock(Path(store), conv_id, timeout)
    return store.conversation_lock(conv_id, timeout)


def file_conversation_lock(store_path, conv_id: str, timeout: float) -> FileLock:
    """A conversation's lock beside the store at ``store_path``: a file named by a hash of the id (ids may hold
    any printable text)."""
    digest = hashlib.sha256(conv_id.encode("utf-8")).hexdigest()[:24]
    return FileLock(lock_dir(store_path) / f"conv-{digest}.lock", timeout,
                    what=f"conversation {conv_id!r}")


def named_lock(store_path: Path, name: str, timeout: float = 60.0) -> FileLock:
    """A store-wide lock by name: ``schema`` (migrations), ``faiss`` (the index files)."""
    return FileLock(lock_dir(store_path) / f"{name}.lock", timeout, what=f"the store's {name}")


class AdvisoryLock(_ReentrantLock):
    """The PostgreSQL flavour of ``FileLock``: a session advisory lock on ``key``, held on a pooled connection
    of its own from ``acquire`` to ``release`` (another process, or another thread of this one, waits up to
    ``timeout`` seconds, then ``LockTimeout`` with the same one line). Re-entrant within one thread.
    PostgreSQL releases it when the connection ends, so a holder killed with SIGKILL leaves nothing locked; a
    connection goes back to the pool only after ``pg_advisory_unlock_all``."""

    def __init__(self, pool, key: int, timeout: float = 60.0, what: str = "", psycopg=None):
        self.pool, self.key, self.timeout, self.what = pool, key, timeout, what
        self.psycopg = psycopg
        self._conn = None
        self._depth = 0
        self._owner: int | None = None
        self._guard = threading.Lock()

    @property
    def _name(self) -> str:
        return f"the lock on {self.what}"

    def _take(self, timeout: float) -> None:
        from psycopg_pool import PoolTimeout

        try:
            conn = self.pool.getconn(timeout=max(timeout, 0.001))
        except PoolTimeout:
            raise LockTimeout(busy_message(self.what, timeout)) from None
        try:
            conn.execute(f"SET lock_timeout = {max(1, int(timeout * 1000))}")
            conn.execute("SELECT pg_advisory_lock(%s)", (self.key,))
        except self.psycopg.errors.LockNotAvailable:
            self.pool.putconn(conn)
            raise LockTimeout(busy_message(self.what, timeout)) from None
        except BaseException:
            conn.close()  # in an unknown state: it leaves the pool (closing it releases any lock)
            self.pool.putconn(conn)
            raise
        self._conn = conn

    def remove(self) -> None:
        """Nothing to delete: an advisory lock lives in the server's memory only."""
        self._check_held("removal")

    def _give(self) -> None:
        conn, self._conn = self._conn, None
        try:
            conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
        except Exception:  # noqa: BLE001 - the connection broke: the server released the lock with it
            conn.close()
        self.pool.putconn(conn)
