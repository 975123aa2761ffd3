"""The default embedder's word vectors: its input table of word pieces, read row by row from its weights file.

A model that must tell what a word means ("screenplay" is a made-up world's, like "novel"; "allotment" is not)
without running the encoder reads the rows of its word pieces: no torch, no forward pass, a few rows of a
memory-mapped file. Always the default embedder's (models/manifest.toml's ``[embedder]``), whichever one
``$LOCALPAGER_EMBEDDER`` chooses for ranking: the models that read these vectors were fitted on its table.
"""

from __future__ import annotations

import logging
import threading
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from .modelpaths import ModelNotFoundError, default_embedder_path

if TYPE_CHECKING:
    import numpy as np

TABLE = "embeddings.word_embeddings.weight"
_log = logging.getLogger(__name__)


class WordVectors:
    """The word-piece table of a BERT model directory (``model.safetensors`` and ``tokenizer.json``)."""

    def __init__(self, directory: Path):
        from safetensors import safe_open
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self._tokenizer.no_padding()  # the file pads every text to the encoder's length: a mean of [PAD] rows
        self._tokenizer.no_truncation()
        self._file = safe_open(str(directory / "model.safetensors"), framework="numpy")
        self._table = self._file.get_slice(TABLE)
        self._lock = threading.Lock()  # one reader of the file at a time
        self.dimensions = int(self._table.get_shape()[1])

    @lru_cache(maxsize=4096)
    def of(self, text: str) -> np.ndarray:
        """The sum of the rows of ``text``'s word pieces (zeros for a text with none): each part of a compound
        ("murder mystery party") counts whole. Out of fold the scene model found more made-up scenes reading sums
        than means (``benchmarks/scenes.py``)."""
        import numpy as np

        ids = self._tokenizer.encode(text, add_special_tokens=False).ids
        if not ids:
            return np.zeros(self.dimensions, dtype=np.float32)
        with self._lock:
            rows = [self._table[i:i + 1] for i in ids]
        return np.concatenate(rows).astype(np.float32).sum(axis=0)


@lru_cache(maxsize=1)
def default_vectors() -> WordVectors | None:
    """The default embedder's word vectors, or None (logged once) when its package is not installed: the models
    that read them then read nothing."""
    try:
        return WordVectors(default_embedder_path())
    except (ModelNotFoundError, OSError) as error:
        _log.warning("word vectors unavailable, made-up scenes and lasting traits are not told apart: %s", error)
        return None
