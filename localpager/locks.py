"""Cross-process locks on files beside the store (``fcntl.flock``).

SQLite serialises single writes, but some work spans several transactions and the model's time: an
``ask`` stores the question, runs the model, then stores the answer. A second ``ask`` on the same
conversation in another process must wait for the first, or its question would take the turn index
the first one's answer needs. ``flock`` locks are released by the kernel when a process dies (even by
``kill -9``), so a crash never leaves a conversation locked.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

POLL_SECONDS = 0.05


class LockTimeout(TimeoutError):
    """Another process (or thread) held the lock for longer than we were willing to wait."""


@dataclass
class FileLock:
    """An exclusive ``flock`` on ``path``, re-entrant within one thread, waiting up to ``timeout`` seconds.

    ``what`` names the thing locked, for the error message ("conversation 'work' is busy ...")."""

    path: Path
    timeout: float = 60.0
    what: str = ""
    _fd: int | None = field(default=None, init=False, repr=False)
    _depth: int = field(default=0, init=False, repr=False)
    _owner: int | None = field(default=None, init=False, repr=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def acquire(self, timeout: float | None = None) -> None:
        me = threading.get_ident()
        with self._guard:
            if self._owner == me:
                self._depth += 1
                return
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        fd = _open_lock_file(self.path)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    if _still_there(fd, self.path):
                        break
                    # its holder removed the file (the conversation was deleted): lock the one there now
                    stale, fd = fd, _open_lock_file(self.path)
                    os.close(stale)
                    continue
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                        raise
                if time.monotonic() >= deadline:
                    raise LockTimeout(
                        f"{self.what or self.path} is busy (another localpager process or thread is using it); "
                        f"waited {timeout:g} s, try again when it has finished"
                    )
                time.sleep(POLL_SECONDS)
        except BaseException:
            os.close(fd)
            raise
        with self._guard:
            self._fd, self._owner, self._depth = fd, me, 1

    def remove(self) -> None:
        """Delete the lock file, held by this thread (what it locked is gone): a process that was waiting
        on it sees, once it gets it, that the file is no longer there, and locks the path afresh."""
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
            fd, self._fd, self._owner = self._fd, None, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> "FileLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _open_lock_file(path: Path) -> int:
    """The lock file's descriptor; created readable by the owner only (its folder too)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _still_there(fd: int, path: Path) -> bool:
    """Whether ``fd`` is still the file at ``path`` (not one its holder removed while we waited)."""
    try:
        here = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino)


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
