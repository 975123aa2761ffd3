"""Saved llama.cpp KV caches, so a new process resumes a conversation without re-reading its prompt.

A one-shot ``ask`` (or an app's first answer after it starts) used to evaluate the whole chat prompt
first: the system text, the bookmarks and every resident turn, hundreds to thousands of tokens. The
chat context's cache is written beside the store when another conversation takes the model and when the
``LocalPager`` closes, and read back before that conversation's next answer. Nothing about it can be
stale in a way that matters: llama.cpp keeps only the leading tokens the saved cache shares with the new
prompt, and the file is named for the model file, llama.cpp build and context it was made with.

The files are ``<store>.kv-<conversation>-<model>-e<generation>``, owner-only, among the store's own
files, so ``forget`` deletes them with everything else. An encrypted store keeps none (they hold the tokens).

A forget in another process must not be undone by this one: a live cache may hold the forgotten turns'
tokens. So a cache is only ever saved for the store's erase generation (``Store.erase_generation``) it was
built under, checked against the store under a lock (``<store>.locks/kv.lock``) that the forgetting process
takes to delete the files: a save either lands before that deletion or sees the new generation and drops
the cache instead. A cache is loaded only from a file of the current generation.

llama.cpp trusts the bytes it loads: a cache damaged past its header can abort the whole process (a fatal
error in the grammar code, exit 134), again on every restart while the file stays. So every cache is written
with the sha256 of its bytes (``<store>.kvsum-…`` beside ``<store>.kv-…``, under the same lock) and loaded
only when they still match, also under that lock; a file that does not (damaged, cut short, written by
something else, or without its checksum) is deleted with one warning and the answer goes on cold.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Callable

from ..backends.base import ChatBackend
from .base import StoreError

log = logging.getLogger("localpager")


def supported(backend: ChatBackend) -> bool:
    return backend.saves_state


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


class PrefixStates:
    """Which conversation's prompt the chat backend's cache holds, and its saved copies on disk."""

    def __init__(self, store_path: Path, enabled: bool = True, keep: int = 8,
                 erasures: Callable[[], int] | None = None):
        """``keep``: saved caches kept beside the store, the most recently written (each is the model's
        KV size per token times the prompt: about 20 KB a token for SmolLM2-135M, over 100 KB for a 3B
        model), so that many conversations do not fill the disk. ``erasures``: reads the store's erase
        generation (none: a store that is never erased)."""
        self.store_path = Path(store_path)
        self.enabled = enabled
        self.keep = keep
        self._erasures = erasures or (lambda: 0)
        self.generation = self._erasures()  # the erase generation what this process holds was built under
        self._saved: dict[str, int] = {}  # conversation -> hash of the tokens last saved or loaded for it

    def _owner(self, backend: ChatBackend) -> str | None:
        """The conversation of this store whose prompt ``backend``'s cache holds (a backend may be shared
        by several ``LocalPager``s, so the backend carries it)."""
        owner = backend.cache_owner
        return owner[1] if owner and owner[0] == str(self.store_path) else None

    def _built(self, backend: ChatBackend) -> int | None:
        """The erase generation the backend's cache was built under (None: not this store's)."""
        owner = backend.cache_owner
        return owner[2] if owner and owner[0] == str(self.store_path) and len(owner) > 2 else None

    def path(self, conv_id: str, backend: ChatBackend, generation: int | None = None) -> Path:
        conv = hashlib.sha256(conv_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        gen = self.generation if generation is None else generation
        return self.store_path.with_name(f"{self.store_path.name}.kv-{conv}-{backend.state_key()}-e{gen}")

    def switch_to(self, conv_id: str, backend: ChatBackend) -> int:
        """Before an answer on ``conv_id``: save the cache of the conversation that had the model, and load
        ``conv_id``'s saved cache if there is one of the current erase generation. The tokens loaded
        (0: none)."""
        if not self.enabled or not supported(backend):
            return 0
        if self._owner(backend) == conv_id and self._built(backend) == self.generation:
            return 0
        self.save(backend)  # (a cache of an older erase generation is dropped instead)
        backend.cache_owner = (str(self.store_path), conv_id, self.generation)
        if self._current() != self.generation:  # erased since: this generation's files may hold the text
            return 0
        path = self.path(conv_id, backend)
        if not path.is_file():
            return 0
        try:
            with self._files():
                problem = self._damage(path)
                loaded = 0 if problem else backend.load_state(path)
                if not loaded:
                    log.warning("deleted a saved model state that %s: %s",
                                problem or "llama.cpp could not read", path.name)
                    self._remove(path)
        except OSError as exc:  # a cache: an unreadable folder or a lock that never came must not fail the answer
            log.warning("did not load the saved model state: %s", exc)
            return 0
        if loaded:
            self._saved[conv_id] = hash(tuple(backend.cached_tokens()))
        return loaded

    def save(self, backend: ChatBackend) -> bool:
        """Write the owner's cache if it changed since it was last saved or loaded, and only if nothing was
        erased since it was built; otherwise the live cache is dropped (it may hold the erased text)."""
        owner = self._owner(backend) if self.enabled and supported(backend) else None
        if owner is None:
            return False
        built = self._built(backend)
        if built != self.generation or self._current() != built:
            self.forget(backend)
            return False
        tokens = backend.cached_tokens()
        if not tokens or self._saved.get(owner) == hash(tuple(tokens)):
            return False
        try:
            with self._files():
                if self._current() != built:  # a forget committed meanwhile: its deletion may have run
                    self.forget(backend)
                    return False
                path = self.path(owner, backend, built)
                self.sum_path(path).unlink(missing_ok=True)  # never an old checksum beside new bytes
                saved = backend.save_state(path)
                if saved:
                    self._write_sum(path)
        except OSError as exc:  # a cache: a full or read-only disk must not fail the answer
            log.warning("could not save the model state: %s", exc)
            return False
        if saved:
            self._saved[owner] = hash(tuple(tokens))
            self._prune()
        return saved

    def _current(self) -> int | None:
        """The store's erase generation now; None when it cannot be read (a closed store: nothing is saved)."""
        try:
            return self._erasures()
        except StoreError:
            return None

    def _files(self):
        """The saved caches of this store, locked against a forget deleting them (see the module's docstring)."""
        from .locks import named_lock

        return named_lock(self.store_path, "kv")

    # -- checksums ------------------------------------------------------------------------------
    def sum_path(self, path: Path) -> Path:
        """Where the checksum of the saved cache ``path`` (``<store>.kv-REST``) is: ``<store>.kvsum-REST``."""
        prefix = f"{self.store_path.name}.kv-"
        return path.with_name(f"{self.store_path.name}.kvsum-{path.name[len(prefix):]}")

    def _write_sum(self, path: Path) -> None:
        """Write ``path``'s sha256 beside it, owner-only, replaced whole."""
        import os

        target = self.sum_path(path)
        tmp = target.with_name(target.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(_file_sha256(path) + "\n")
        os.replace(tmp, target)

    def _damage(self, path: Path) -> str | None:
        """Why the saved cache at ``path`` must not reach llama.cpp (no checksum, or another one), or None."""
        try:
            expected = self.sum_path(path).read_text().strip()
        except FileNotFoundError:
            return "has no checksum"
        except (OSError, ValueError):
            return "has an unreadable checksum"
        return None if _file_sha256(path) == expected else "does not match its checksum"

    def _remove(self, path: Path) -> None:
        for each in (path, self.sum_path(path)):
            each.unlink(missing_ok=True)

    def remove_saved(self) -> None:
        """Delete every saved cache of this store (after an erase committed): under the lock a saving
        process takes, so a save of an older generation either happened before (and is deleted here) or
        sees the new generation and saves nothing."""
        import glob

        name = glob.escape(self.store_path.name)
        with self._files():
            for pattern in (f"{name}.kv-*", f"{name}.kvsum-*"):
                for path in self.store_path.parent.glob(pattern):
                    path.unlink(missing_ok=True)

    def _prune(self) -> None:
        """Delete all but the ``keep`` most recently saved caches of this store (with their checksums)."""
        import glob

        files = [p for p in self.store_path.parent.glob(f"{glob.escape(self.store_path.name)}.kv-*")
                 if not p.name.endswith(".tmp")]
        for path in sorted(files, key=lambda p: p.stat().st_mtime_ns, reverse=True)[self.keep:]:
            self._remove(path)

    def forget(self, backend: ChatBackend | None = None, generation: int | None = None) -> None:
        """After an erase: the live cache may hold erased text, so it goes too (the files go with the
        store's own files); ``generation``: the erase generation what the process holds now is built under."""
        self._saved.clear()
        if generation is not None:
            self.generation = generation
        if backend is not None and self._owner(backend) is not None:
            backend.cache_owner = None
            backend.clear_cache()
