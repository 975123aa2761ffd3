"""Cross-process locks on files beside the store (the ``filelock`` package: flock on POSIX, msvcrt on Windows).

SQLite serialises single writes, but some work spans several transactions and the model's time: an
``ask`` stores the question, runs the model, then stores the answer. A second ``ask`` on the same
conversation in another process must wait for the first, or its question would take the turn index
the first one's answer needs. The operating system releases these locks when a process dies (even by
``kill -9``), so a crash never leaves a conversation locked. Nothing here imports a POSIX-only module: the
library imports on Windows too.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from pathlib import Path

import filelock

POLL_SECONDS = 0.05


class LockTimeout(TimeoutError):
    """Another process (or thread) held the lock for longer than we were willing to wait."""


@dataclass
class FileLock:
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

    def acquire(self, timeout: float | None = None) -> None:
        me = threading.get_ident()
        with self._guard:
            if self._owner == me:
                self._depth += 1
                return
        timeout = self.timeout if timeout is None else timeout
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            self._lock.acquire(timeout=timeout, poll_interval=POLL_SECONDS)
        except filelock.Timeout:
            raise LockTimeout(
                f"{self.what or self.path} is busy (another localpager process or thread is using it); "
                f"waited {timeout:g} s, try again when it has finished"
            ) from None
        with self._guard:
            self._owner, self._depth = me, 1

    def remove(self) -> None:
        """Delete the lock file, held by this thread (what it locked is gone). ``filelock`` checks, when it gets
        a lock, that the file it locked is still the one at the path, so a process that was waiting on the old
        file locks the path afresh: never two holders at once."""
        with self._guard:
            if self._owner != threading.get_ident():
                raise RuntimeError(f"removal of {self.path} by a thread that does not hold it")
            self.path.unlink(missing_ok=True)

    def release(self) -> None:
        with self._guard:
            if self._owner != threading.get_ident():
                raise RuntimeError(f"release of {self.path} by a thread that does not hold it")
            self._depth -= 1
            if self._depth:
                return
            self._owner = None
        self._lock.release()

    def __enter__(self) -> "FileLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_dir(store_path: Path) -> Path:
    """Where a store's lock files live: ``<store>.locks/`` beside it."""
    return Path(f"{store_path}.locks")


def conversation_lock(store_path: Path, conv_id: str, timeout: float) -> FileLock:
    """The lock one conversation's writers take (file named by a hash: ids may hold any printable text)."""
    digest = hashlib.sha256(conv_id.encode("utf-8")).hexdigest()[:24]
    return FileLock(lock_dir(store_path) / f"conv-{digest}.lock", timeout,
                    what=f"conversation {conv_id!r}")


def named_lock(store_path: Path, name: str, timeout: float = 60.0) -> FileLock:
    """A store-wide lock by name: ``schema`` (migrations), ``faiss`` (the index files)."""
    return FileLock(lock_dir(store_path) / f"{name}.lock", timeout, what=f"the store's {name}")
