"""A conversation's BM25 postings and turn table saved beside a local store, so that a new process reads
them instead of tokenising every turn again (about 3 s at 100,000 turns on 2 cores).

Derived data, like the FAISS files: one ``<store>.lexical-<sha1 of the conversation id>.npz`` per
conversation, numpy arrays only (no pickle: nothing in it runs when read). It holds the conversation's
words, so it is never written beside an encrypted or read-only store nor a database server's, is deleted
whenever the store erases anything (``LocalPager.after_erase`` / ``drop_held``), and an erase check reads
it like every ``<store>.*`` file. A file is used only while it still describes the conversation's first
turns: same number or fewer, the same text for its last turn, the same erase generation and settings.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

log = logging.getLogger(__name__)
VERSION = 1
TABLE_COLUMNS = ("text", "question", "tells", "stated", "speaker")


def path_for(store_path: Path, conv_id: str) -> Path:
    return Path(f"{store_path}.lexical-{hashlib.sha1(conv_id.encode()).hexdigest()[:16]}.npz")


def remove_all(store_path: Path) -> None:
    """Delete every saved lexical file of the store (after an erase: they may hold forgotten words)."""
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


def save(path: Path, stamp: dict, grown, table, last_text: str) -> None:
    """Write ``grown`` (``ranking._Appendable``) and ``table`` (``ranking.TurnTable``) owner-only, whole."""
    from .index import private_file

    postings = _flatten(grown._postings, 2)
    names = _flatten({k: (v,) for k, v in table.names.items()}, 1)
    arrays = {f"p_{k}": v for k, v in postings.items()} | {f"n_{k}": v for k, v in names.items()}
    arrays |= {f"t_{c}": np.array(table._rows[c], dtype=str if c == "speaker" else np.int64) for c in TABLE_COLUMNS}
    arrays["lengths"] = np.array(grown._lengths, dtype=np.int64)
    arrays["stamp"] = np.array([repr(sorted({**stamp, "version": VERSION, "n": grown.n,
                                             "last": last_text}.items()))], dtype=str)
    tmp = path.with_name(path.name + ".tmp")
    try:
        private_file(tmp)
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except OSError as exc:  # derived data: the next process builds it again
        log.warning("could not save %s: %s", path, exc)
        tmp.unlink(missing_ok=True)


def load(path: Path, stamp: dict, turns, new_index: Callable[[], Any], new_table: Callable[[], Any]):
    """(grown, table) from ``path`` if it still describes the first turns of ``turns``; else None. ``new_index``
    and ``new_table`` make the empty ``ranking._Appendable`` and ``ranking.TurnTable`` it fills (passed in, so
    that this module imports nothing of the ranking's)."""
    from collections import Counter

    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError) as exc:
        log.warning("ignoring %s: %s", path, exc)
        return None
    n = len(arrays["lengths"])
    if not 0 < n <= len(turns):
        return None
    expected = repr(sorted({**stamp, "version": VERSION, "n": n, "last": turns[n - 1].text}.items()))
    if str(arrays["stamp"][0]) != expected:
        return None
    grown = new_index()
    grown._postings = _unflatten(arrays["p_keys"], arrays["p_sizes"], [arrays["p_col0"], arrays["p_col1"]])
    grown.df = Counter(dict(zip(arrays["p_keys"].tolist(), arrays["p_sizes"].tolist())))
    grown._lengths = arrays["lengths"].tolist()
    grown.total_length, grown.n = int(arrays["lengths"].sum()), n
    table = new_table()
    table._rows = {c: arrays[f"t_{c}"].tolist() for c in TABLE_COLUMNS}
    for c in ("text", "question", "tells"):
        table._rows[c] = [bool(v) for v in table._rows[c]]
    table.speakers = {s for s in table._rows["speaker"] if s}
    names = _unflatten(arrays["n_keys"], arrays["n_sizes"], [arrays["n_col0"]])
    table.names = {k: list(v[0]) for k, v in names.items()}
    table.n = n
    return grown, table
