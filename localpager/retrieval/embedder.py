"""Sentence embeddings on the CPU, from a local sentence-transformers directory only.

The default model (all-MiniLM-L6-v2) and other BERT encoders with mean pooling run in numpy
(``localpager.retrieval.bert``): no torch, so the first answer of a process does not wait seconds for its import.
Any other model runs in ``sentence_transformers``, imported on first use, never at start-up. Offline without touching the process's environment: the path must be a model directory
(``modelpaths.embedder_path`` checks it before anything loads) and the model loads with
``local_files_only=True``, so a wrong path fails instead of reaching for the network.
"""

from __future__ import annotations

import os
import threading
from functools import lru_cache

import numpy as np

from ..backends.modelpaths import embedder_path


class Embedder:
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
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
            if missing:
                vectors = model.encode(missing, batch_size=batch_size, threads=self._threads())
                if len(self._cache) > 50_000:
                    self._cache.clear()
                self._cache.update(zip(missing, vectors.astype(np.float32)))
            if not texts:
                return np.zeros((0, self.dim), dtype=np.float32)
            return np.stack([self._cache[t] for t in texts])

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]

    def _threads(self) -> int:
        if self.threads:
            return self.threads
        from ..backends.cores import free_cores

        return free_cores()


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
