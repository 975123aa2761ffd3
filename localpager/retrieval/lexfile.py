"""A conversation's BM25 postings and turn table saved beside a local store, so that a new process reads
them instead of tokenising every turn again (about 3 s at 100,000 turns on 2 cores).

Derived data, like the FAISS files: one ``<store>.lexical-<sha1 of the conversation id>.npz`` per
conversation, numpy arrays only (no pickle: nothing in it runs when read). It holds the conversation's
words, so it is never written beside an encrypted or read-only store nor a database server's, is deleted
whenever the store erases anything (``LocalPager.after_erase`` / ``drop_held``), and an erase check reads
it like every ``<store>.*`` file. A file is used only while it still describes the conversation's first
turns: same number or fewer, the same text for its last turn, the same erase generation and settings.

A file is written only under the store's ``lexical`` lock by a process whose index was built under the erase
generation the store has then (``save``'s ``current``); the deletion after an erase takes the same lock, so
a postings file holding erased words is never written back after it. A file is read only when its sha256
(an array beside the others) matches and every array is in range for the turns it claims (rows, sizes,
lengths, the turns that have text); a damaged or foreign one is deleted with one warning and built again.
"""

from __future__ import annotations

import hashlib
import logging
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

import numpy as np

log = logging.getLogger(__name__)
VERSION = 2  # 2: with its checksum
TABLE_COLUMNS = ("text", "question", "tells", "stated", "speaker")


def path_for(store_path: Path, conv_id: str) -> Path:
    return Path(f"{store_path}.lexical-{hashlib.sha1(conv_id.encode()).hexdigest()[:16]}.npz")


@contextmanager
def _locked(store_path: Path):
    """The store's ``lexical`` lock (``<store>.locks/lexical.lock``); none where it cannot be made (a read-only
    folder: nothing can be written there either)."""
    from ..store.locks import LockTimeout, named_lock

    lock = named_lock(Path(store_path), "lexical")
    try:
        lock.acquire()
    except LockTimeout:
        raise
    except OSError:
        yield
        return
    try:
        yield
    finally:
        lock.release()


def _store_of(path: Path) -> Path:
    """The store a lexical file belongs to (``path_for``'s inverse)."""
    return Path(str(path).rsplit(".lexical-", 1)[0])


def remove_all(store_path: Path) -> None:
    """Delete every saved lexical file of the store (after an erase: they may hold forgotten words), under
    the lock a saving process takes: its save lands before this (and goes) or sees the new generation."""
    from ..store.locks import LockTimeout

    try:
        with _locked(store_path):
            _remove_all(store_path)
    except LockTimeout:  # a save stuck for a minute: delete what is there anyway
        _remove_all(store_path)


def _remove_all(store_path: Path) -> None:
    import glob

    for path in Path(store_path).parent.glob(glob.escape(Path(store_path).name) + ".lexical-*"):
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:  # a read-only folder: nothing could have been written there by this process
            log.warning("could not delete %s: %s", path, exc)


def _flatten(groups: dict[str, tuple[list[int], ...]], width: int) -> dict[str, np.ndarray]:
    keys = list(groups)
    sizes = np.array([len(groups[k][0]) for k in keys], dtype=np.int64)
    out = {"keys": np.array(keys, dtype=str), "sizes": sizes}
    for c in range(width):
        out[f"col{c}"] = np.array([v for k in keys for v in groups[k][c]], dtype=np.int64)
    return out


def _unflatten(keys: np.ndarray, sizes: np.ndarray, columns: list[np.ndarray]) -> dict:
    lists = [c.tolist() for c in columns]
    out, start = {}, 0
    for key, size in zip(keys.tolist(), sizes.tolist()):
        out[key] = tuple(col[start:start + size] for col in lists)
        start += size
    return out


def _digest(arrays: dict[str, np.ndarray]) -> str:
    """sha256 over every array but ``digest`` (name, type, shape and bytes, by name)."""
    h = hashlib.sha256()
    for name in sorted(k for k in arrays if k != "digest"):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def save(path: Path, stamp: dict, grown, table, last_text: str, current: Callable[[], bool] | None = None) -> bool:
    """Write ``grown`` (``ranking._Appendable``) and ``table`` (``ranking.TurnTable``) owner-only, whole, with
    the sha256 of its arrays; ``current()`` (read under the store's lexical lock, just before writing) says
    nothing was erased since they were built: if it says otherwise, nothing is written. True if written."""
    from ..store.locks import LockTimeout

    try:
        with _locked(_store_of(path)):
            if current is not None and not current():
                return False
            return _write(path, stamp, grown, table, last_text)
    except LockTimeout as exc:  # an erase holds it for long: this file is a cache, not worth waiting more for
        log.warning("did not save %s: %s", path, exc)
        return False


def _write(path: Path, stamp: dict, grown, table, last_text: str) -> bool:
    from .index import private_file

    postings = _flatten(grown._postings, 2)
    names = _flatten({k: (v,) for k, v in table.names.items()}, 1)
    arrays = {f"p_{k}": v for k, v in postings.items()} | {f"n_{k}": v for k, v in names.items()}
    arrays |= {f"t_{c}": np.array(table._rows[c], dtype=str if c == "speaker" else np.int64) for c in TABLE_COLUMNS}
    arrays["lengths"] = np.array(grown._lengths, dtype=np.int64)
    arrays["stamp"] = np.array([repr(sorted({**stamp, "version": VERSION, "n": grown.n,
                                             "last": last_text}.items()))], dtype=str)
    arrays["digest"] = np.array([_digest(arrays)], dtype=str)
    tmp = path.with_name(path.name + ".tmp")
    try:
        private_file(tmp)
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except OSError as exc:  # derived data: the next process builds it again
        log.warning("could not save %s: %s", path, exc)
        tmp.unlink(missing_ok=True)
        return False
    return True


class DamagedFile(ValueError):
    """A lexical file that is not what this store wrote."""


def load(path: Path, stamp: dict, turns, new_index: Callable[[], Any], new_table: Callable[[], Any]):
    """(grown, table) from ``path`` if it still describes the first turns of ``turns``; else None (a damaged or
    foreign file is deleted with one warning). ``new_index`` and ``new_table`` make the empty
    ``ranking._Appendable`` and ``ranking.TurnTable`` it fills (passed in, so that this module imports nothing
    of the ranking's)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except FileNotFoundError:
        return None
    except Exception as exc:  # noqa: BLE001 - not a readable npz (zip damage, bad headers): built again
        return _damaged(path, exc)
    try:
        n = len(arrays["lengths"])
        if not 0 < n <= len(turns):
            return None
        expected = repr(sorted({**stamp, "version": VERSION, "n": n, "last": turns[n - 1].text}.items()))
        if str(arrays["stamp"][0]) != expected:
            return None  # another state of the conversation, other settings, an earlier version: no warning
        digest = arrays.get("digest")
        if digest is None or digest.shape != (1,) or str(digest[0]) != _digest(arrays):
            raise DamagedFile("its checksum does not match")
        _check_arrays(arrays, n, turns)
        return _filled(arrays, n, new_index(), new_table())
    except Exception as exc:  # noqa: BLE001 - whatever is wrong with derived data: built again from the turns
        return _damaged(path, exc)


def _damaged(path: Path, exc: Exception) -> None:
    """One warning; the file goes (the index is built again from the turns and saved anew)."""
    log.warning("rebuilding %s from the store: %s", path, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _check_arrays(arrays: dict[str, np.ndarray], n: int, turns) -> None:
    """Raise ``DamagedFile`` unless every array fits ``n`` turns: postings and names point at rows 0..n-1, sizes
    add up, lengths and counts are not negative, one table row a turn, the same turns have text as in
    ``turns`` (a turn the store forgot is never in it)."""
    def ints(name: str, length: int | None = None, low: int = 0, high: int | None = None) -> np.ndarray:
        a = arrays[name]
        if a.ndim != 1 or a.dtype.kind not in "iu" or (length is not None and len(a) != length):
            raise DamagedFile(f"array {name} has the wrong type or size")
        if len(a) and (int(a.min()) < low or (high is not None and int(a.max()) >= high)):
            raise DamagedFile(f"array {name} is out of range")
        return a

    for prefix, columns in (("p_", ((0, n), (1, None))), ("n_", ((0, n),))):
        keys = arrays[f"{prefix}keys"]
        if keys.ndim != 1 or keys.dtype.kind != "U" or len(set(keys.tolist())) != len(keys):
            raise DamagedFile(f"array {prefix}keys has the wrong type or repeats a key")
        total = int(ints(f"{prefix}sizes", len(keys)).sum())
        for c, (low, high) in enumerate(columns):
            ints(f"{prefix}col{c}", total, low if c == 0 else 1, high)
    ints("lengths", n)
    ints("t_stated", n)
    for c in ("text", "question", "tells", "speaker"):
        if arrays[f"t_{c}"].ndim != 1 or len(arrays[f"t_{c}"]) != n:
            raise DamagedFile(f"array t_{c} has the wrong size")
    if arrays["t_speaker"].dtype.kind != "U":
        raise DamagedFile("array t_speaker has the wrong type")
    if arrays["t_text"].astype(bool).tolist() != [bool(t.text) for t in turns[:n]]:
        raise DamagedFile("its turns with text are not the store's")


def _filled(arrays: dict[str, np.ndarray], n: int, grown, table):
    from collections import Counter

    grown._postings = _unflatten(arrays["p_keys"], arrays["p_sizes"], [arrays["p_col0"], arrays["p_col1"]])
    grown.df = Counter(dict(zip(arrays["p_keys"].tolist(), arrays["p_sizes"].tolist())))
    grown._lengths = arrays["lengths"].tolist()
    grown.total_length, grown.n = int(arrays["lengths"].sum()), n
    table._rows = {c: arrays[f"t_{c}"].tolist() for c in TABLE_COLUMNS}
    for c in ("text", "question", "tells"):
        table._rows[c] = [bool(v) for v in table._rows[c]]
    table.speakers = {s for s in table._rows["speaker"] if s}
    names = _unflatten(arrays["n_keys"], arrays["n_sizes"], [arrays["n_col0"]])
    table.names = {k: list(v[0]) for k, v in names.items()}
    table.n = n
    return grown, table
