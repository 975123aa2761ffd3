"""Sentence embeddings on the CPU, from a local sentence-transformers directory only.

The default model (all-MiniLM-L6-v2) and other BERT encoders with mean pooling run in numpy
(``localpager.retrieval.bert``): no torch, so the first answer of a process does not wait seconds for its import.
Any other model runs in ``sentence_transformers``, imported on first use, never at start-up. Offline without touching the process's environment: the path must be a model directory
(``modelpaths.embedder_path`` checks it before anything loads) and the model loads with
``local_files_only=True``, so a wrong path fails instead of reaching for the network.

Texts known to be needed soon (an import's evicted turns, ``encode_ahead``) are encoded meanwhile in a helper
process, so that encoding overlaps the pure-Python work beside it (paging, store writes, BM25). Not on a thread:
an encoder thread beside a busy Python thread waits for the interpreter lock after each of its many short numpy
calls, and ran at 16 turns/s instead of 55 (issue 34).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from concurrent.futures import Future
from functools import lru_cache

import numpy as np

from ..core.modelpaths import embedder_path

log = logging.getLogger("localpager")


class TextEmbedder:
    """What retrieval asks of an embedder: ``name`` (stored with each vector: vectors of another model are not
    ranked), ``dim`` and ``encode``, normalised float32 rows (cosine similarity is a dot product). Every embedder
    subclasses it (``Embedder``, the product's; a test's); the optional abilities are declared here with the
    answer of an embedder that lacks them, and one that has an ability overrides it."""

    name: str
    dim: int

    def encode(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        """One L2-normalised float32 row per text."""
        raise NotImplementedError

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]

    # -- optional abilities ------------------------------------------------------------------------
    @property
    def known_dim(self) -> int | None:
        """The width of its vectors when known without loading a model (None: not known yet); an embedder with
        nothing to load knows its ``dim``."""
        return self.dim

    def warm(self) -> None:
        """Start loading the model in the background; nothing to load by default."""

    def encode_ahead(self, texts: list[str]) -> int:
        """Start encoding ``texts`` that a later ``encode`` will ask for; how many were handed over (none by
        default: ``encode`` does them when asked)."""
        return 0

    def clear_cache(self) -> None:
        """Forget the texts encoded so far (an embedder that keeps none has nothing to forget)."""


class Embedder(TextEmbedder):
    """Normalised float32 embeddings; cosine similarity is a dot product."""

    def __init__(self, path: str | os.PathLike | None = None, threads: int | None = None):
        """``threads``: how many batches the numpy encoder runs at once (by default the cores other work
        leaves free, ``backends.cores.free_cores``, as for the chat model); for a model that runs in
        sentence-transformers, torch's CPU threads, set (for the whole process: torch has one setting) when it
        loads, and by default torch's own choice is left alone."""
        self.path = embedder_path(path)
        self.name = self.path.parent.name if self.path.name == "model" else self.path.name
        self.threads = threads
        self._model = None
        self._warming = False
        self._lock = threading.Lock()
        self._cache: dict[str, np.ndarray] = {}
        self._ahead: _Ahead | None = None  # texts handed to the helper process, not yet taken (``encode_ahead``)

    def _load(self):
        if self._model is None:
            from .bert import NumpyBertEncoder, supports

            if supports(self.path):
                self._model = NumpyBertEncoder(self.path)
                return self._model
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            if self.threads:  # asked for explicitly
                import torch

                torch.set_num_threads(self.threads)
            bars = hf_logging.is_progress_bar_enabled()
            hf_logging.disable_progress_bar()  # no loading bar on stderr, and the caller's setting back after
            try:
                self._model = _SentenceTransformersEncoder(
                    SentenceTransformer(str(self.path), device="cpu", local_files_only=True))
            finally:
                if bars:
                    hf_logging.enable_progress_bar()
        return self._model

    def warm(self) -> None:
        """Load the model on a background thread, so that it loads while the chat model does (an app
        opening a conversation, a one-shot ``ask``); the first ``encode`` waits for it, and reports any
        error itself."""
        if self._model is not None or self._warming:
            return
        self._warming = True

        def load() -> None:
            try:
                with self._lock:
                    self._load()
            except BaseException:  # noqa: BLE001 - encode() loads again and raises it where it matters
                pass

        threading.Thread(target=load, name="localpager-embedder", daemon=True).start()

    @property
    def dim(self) -> int:
        return self._load().dim

    @property
    def known_dim(self) -> int | None:
        """The width of its vectors when known without loading the model: loaded, or a model the numpy encoder
        runs (its ``hidden_size``); None otherwise."""
        if self._model is not None:
            return int(self._model.dim)
        from .bert import _read, supports

        if supports(self.path):
            size = _read(self.path / "config.json").get("hidden_size")
            return size if type(size) is int and size > 0 else None
        return None

    def encode(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        """One row per text, L2-normalised float32; repeated texts are served from a small cache.

        The numpy encoder batches texts of similar length up to a number of tokens (``bert.length_batches``:
        its activations stay about 10 MB a batch whatever the texts' length), on ``threads`` threads;
        ``batch_size`` caps the texts of a batch (sentence-transformers: 16 unless given). The vectors do not
        depend on the batching beyond float rounding (1e-7)."""
        with self._lock:
            model = self._load()
            if not texts:
                return np.zeros((0, self.dim), dtype=np.float32)
            wanted = list(dict.fromkeys(texts))
            found = {t: self._cache[t] for t in wanted if t in self._cache}
            missing = [t for t in wanted if t not in found]
            if missing and self._ahead is not None:
                found.update(self._take_ahead(missing))
                missing = [t for t in missing if t not in found]
            if missing:
                vectors = model.encode(missing, batch_size=batch_size, threads=self._threads())
                computed = dict(zip(missing, vectors.astype(np.float32)))
                found.update(computed)
                self._remember(computed)
            return np.stack([found[t] for t in texts])

    def _remember(self, vectors: dict[str, np.ndarray]) -> None:
        """Keep ``vectors`` in the cache (emptied first when it would pass 50,000 texts)."""
        if len(self._cache) + len(vectors) > 50_000:
            self._cache.clear()
        self._cache.update(vectors)

    def clear_cache(self) -> None:
        """Forget the vectors of the texts encoded so far (``PageIndex.unload``)."""
        self._cache.clear()

    # -- texts encoded ahead, in a helper process -------------------------------------------------
    AHEAD_MIN = 512  # fewer texts are not worth starting a process for (about a second, numpy and the model)
    AHEAD_MAX = 50_000  # texts waiting to be taken at most (each vector 1.5 KB); past it texts are left to encode()

    def encode_ahead(self, texts: list[str]) -> int:
        """Start encoding ``texts`` in a helper process, so that a later ``encode`` of them finds them done (it
        waits for those still running): for texts certain to be asked for soon, while this process does other
        work (an import pages its next conversation). Returns how many were handed over: none for a model that
        runs in sentence-transformers, for texts already cached or handed, for fewer than ``AHEAD_MIN`` texts
        when no helper runs yet, or if the helper cannot start (then ``encode`` does the work, as always).

        The helper runs the same numpy encoder, so the vectors are the same as ``encode``'s to float rounding;
        it takes the cores other work leaves free (``threads`` if given), chunk by chunk. It ends when every
        text handed over was taken, at ``end_ahead``, or when the process exits."""
        from .bert import supports

        with self._lock:
            ahead = self._ahead
            taken = set(ahead.pending) if ahead is not None else set()
            fresh = [t for t in dict.fromkeys(texts) if t not in self._cache and t not in taken]
            room = self.AHEAD_MAX - len(taken)
            fresh = fresh[:max(0, room)]
            if not fresh or (ahead is None and len(fresh) < self.AHEAD_MIN) or not supports(self.path):
                return 0
            if ahead is None:
                try:
                    ahead = self._ahead = _Ahead(self.path, self.threads)
                except Exception as exc:  # noqa: BLE001 - no helper (a platform without processes): encode() does it
                    log.debug("no helper process to embed ahead: %s", exc)
                    return 0
            return ahead.submit(fresh)

    def end_ahead(self) -> None:
        """Stop the helper process and forget what it had not handed back (``encode`` computes it if asked)."""
        with self._lock:
            ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.close()

    def _take_ahead(self, wanted: list[str]) -> dict[str, np.ndarray]:
        """The vectors of ``wanted`` that were handed ahead, waiting for those still being encoded (under
        ``_lock``), kept in the cache too; the helper ends once every text handed over was taken. A helper that
        failed is ended, with one warning, and its texts are left to ``encode``."""
        ahead = self._ahead
        try:
            vectors = ahead.take(wanted)
        except Exception as exc:  # noqa: BLE001 - a helper that died: the caller encodes the texts itself
            log.warning("embedding ahead failed (%s); embedding here instead", exc)
            self._ahead = None
            ahead.close()
            return {}
        self._remember(vectors)
        if not ahead.pending:
            self._ahead = None
            ahead.close()
        return vectors

    def _threads(self) -> int:
        if self.threads:
            return self.threads
        from ..backends.cores import free_cores

        return free_cores()


AHEAD_CHUNK = 256  # texts a helper's task encodes: the first vectors come back early, threads chosen per chunk

_helper_encoder = None  # the helper process's own encoder


def _helper_start(path: str) -> None:
    global _helper_encoder
    from .bert import NumpyBertEncoder

    _helper_encoder = NumpyBertEncoder(path)


def _helper_encode(texts: list[str], threads: int | None) -> np.ndarray:
    """A helper's task: ``texts`` encoded on ``threads`` threads, or the cores other work leaves free now (the
    process handing them over counts as other work while it pages)."""
    if not threads:
        from ..backends.cores import free_cores

        threads = free_cores()
    return _helper_encoder.encode(texts, threads=threads).astype(np.float32, copy=False)


class _Ahead:
    """One helper process encoding texts in the order they are handed over, a chunk a task, and the vectors it
    returned that were not taken yet."""

    def __init__(self, path, threads: int | None, pool=None):
        """``pool``: an executor whose workers have run ``_helper_start`` (a test's threads); by default one
        process, spawned (a fork would copy this process's threads, locks and chat model)."""
        if pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_helper_start, initargs=(str(path),))
        self.pool = pool
        self.threads = threads
        self.pending: dict[str, tuple[Future, int]] = {}  # text -> (its chunk's task, its row there)
        _OPEN.add(self)
        _hook_exit()

    def submit(self, texts: list[str]) -> int:
        for start in range(0, len(texts), AHEAD_CHUNK):
            chunk = texts[start:start + AHEAD_CHUNK]
            future = self.pool.submit(_helper_encode, chunk, self.threads)
            self.pending.update((t, (future, row)) for row, t in enumerate(chunk))
        return len(texts)

    def take(self, wanted: list[str]) -> dict[str, np.ndarray]:
        """The vectors of ``wanted`` that were handed over (waiting for their tasks), removed from ``pending``."""
        out = {}
        for text in wanted:
            entry = self.pending.get(text)
            if entry is not None:
                out[text] = entry[0].result()[entry[1]]
        for text in out:
            del self.pending[text]
        return out

    def close(self) -> None:
        """Cancel what has not started and end the helper without waiting for a task under way."""
        _OPEN.discard(self)
        self.pending.clear()
        processes = list((getattr(self.pool, "_processes", None) or {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            if process.is_alive():
                process.terminate()


_OPEN: set[_Ahead] = set()
_HOOKED = False


def _close_helpers() -> None:
    for ahead in list(_OPEN):
        ahead.close()


def _hook_exit() -> None:
    """End the helpers when the process exits, before ``concurrent.futures`` waits at exit for every task queued
    (minutes of encoding nobody will take): its hook runs at the threads' shutdown, before ``atexit``'s, last
    registered first, so this one is registered there too, after it (when ``ProcessPoolExecutor`` is imported)."""
    global _HOOKED
    if not _HOOKED:
        _HOOKED = True
        register = getattr(threading, "_register_atexit", None)
        try:
            register(_close_helpers) if register is not None else atexit.register(_close_helpers)
        except RuntimeError:  # already shutting down
            pass


class _SentenceTransformersEncoder:
    """A ``SentenceTransformer`` behind the numpy encoder's two members."""

    def __init__(self, model):
        self.model = model
        dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dim = int(dim())

    def encode(self, texts: list[str], batch_size: int | None, threads: int = 1) -> np.ndarray:
        """``threads`` is torch's, set when the model loads."""
        return self.model.encode(texts, batch_size=batch_size or 16, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False)


@lru_cache(maxsize=2)
def default_embedder(path: str | None = None) -> Embedder:
    """One shared embedder per model directory."""
    return Embedder(path)
