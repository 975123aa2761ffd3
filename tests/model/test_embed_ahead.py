"""Texts embedded ahead in the real helper process: the same vectors as the encoder in this process, within 0.99
cosine of the reference encoder (sentence-transformers on torch), and the helper gone once all are taken."""

from __future__ import annotations

import time

import numpy as np
import pytest

from localpager.core.modelpaths import embedder_path
from localpager.lab.synthetic import generate_dataset
from localpager.retrieval.bert import NumpyBertEncoder
from localpager.retrieval.embedder import Embedder


@pytest.mark.embedder
def test_vectors_embedded_ahead_are_the_encoders_and_near_the_reference():
    from sentence_transformers import SentenceTransformer

    texts = list(dict.fromkeys(t.text for c in generate_dataset(2, seed=100, phrasing="heldout") for t in c.turns))
    texts = texts[:80] + ["Café, résumé, naïve; 東京で会いましょう 😀", "budget " * 400, "Bye!"]
    path = embedder_path(None)
    embedder = Embedder(path, threads=1)
    embedder.AHEAD_MIN = 1
    assert embedder.encode_ahead(texts) == len(texts)
    helper = embedder._ahead
    processes = list(helper.pool._processes.values())
    ahead = embedder.encode(texts)
    assert embedder._ahead is None  # all taken: the helper ended
    # Each helper process ends. Polled, not joined: the pool's own thread may reap it first, and until its exit code
    # is read is_alive() says True (join returns at once then); an exit once took over 10 s beside other work.
    deadline = time.monotonic() + 60
    while any(p.is_alive() for p in processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(p.is_alive() for p in processes)
    here = NumpyBertEncoder(path).encode(texts)
    assert np.abs(ahead - here).max() < 1e-5
    reference = SentenceTransformer(str(path), device="cpu", local_files_only=True).encode(
        texts, normalize_embeddings=True, convert_to_numpy=True)
    cosines = (ahead * reference).sum(axis=1)
    assert cosines.min() >= 0.99
