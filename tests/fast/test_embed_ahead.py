"""Texts embedded ahead (``Embedder.encode_ahead``): handed over, taken by ``encode``, the helper ended, and an
ingest that will be embedded handing over exactly the turns ``prepare`` embeds. The helper here is a thread
running the hashing embedder (tests/model/test_embed_ahead.py runs the real process and encoder)."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from fakes import HashEmbedder

import localpager.retrieval.bert as bert
import localpager.retrieval.embedder as embedder_module
from localpager.retrieval.embedder import Embedder


class _Encoder:
    """The numpy encoder's ``encode`` and ``dim``, on the hashing embedder, counting what it encodes."""

    def __init__(self, fail: bool = False):
        self.inner, self.dim, self.fail, self.texts = HashEmbedder(dim=384), 384, fail, []

    def encode(self, texts, batch_size=None, threads=1):
        if self.fail:
            raise RuntimeError("the helper died")
        self.texts += texts
        return self.inner.encode(list(texts))


@pytest.fixture
def ahead(tmp_path, monkeypatch):
    """An ``Embedder`` on a fake model directory whose helper is a thread: (embedder, its own encoder, the
    helper's encoder, the helpers started)."""
    (tmp_path / "config.json").write_text("{}")
    helper, started, real = _Encoder(), [], embedder_module._Ahead

    def make(path, threads):
        started.append(real(path, threads, pool=ThreadPoolExecutor(1)))
        return started[-1]

    monkeypatch.setattr(bert, "supports", lambda path: True)
    monkeypatch.setattr(embedder_module, "_Ahead", make)
    monkeypatch.setattr(embedder_module, "_helper_encoder", helper)
    e = Embedder(tmp_path, threads=1)
    e._model = own = _Encoder()
    e._load = lambda: own  # the fake model (conftest refuses the real one's loading here)
    e.AHEAD_MIN = 3
    return e, own, helper, started


def test_texts_handed_ahead_are_taken_by_encode_and_the_helper_ends(ahead):
    e, own, helper, started = ahead
    texts = [f"turn number {i}" for i in range(600)]  # three of the helper's chunks
    assert e.encode_ahead(texts + texts[:5]) == 600  # each text once
    vectors = e.encode(texts[:10] + ["a text nobody handed over"])
    assert own.texts == ["a text nobody handed over"]  # the rest came from the helper
    assert np.allclose(vectors[:10], HashEmbedder(dim=384).encode(texts[:10]))
    assert e._ahead is started[0] and len(e._ahead.pending) == 590
    e.encode(texts[10:])
    assert own.texts == ["a text nobody handed over"] and sorted(helper.texts) == sorted(texts)
    assert e._ahead is None and started[0].pending == {}  # every text taken: the helper is ended


def test_what_is_not_handed_ahead(ahead):
    e, own, helper, started = ahead
    assert e.encode_ahead(["one", "two"]) == 0 and not started  # fewer than AHEAD_MIN: no helper for that
    e.encode(["cached"])
    assert e.encode_ahead(["cached", "one", "two"]) == 0  # "cached" is not handed: two are left
    assert e.encode_ahead(["one", "two", "three"]) == 3
    assert e.encode_ahead(["one", "four"]) == 1  # once the helper runs, any number; "one" is already there
    e.AHEAD_MAX = 5
    assert e.encode_ahead(["five", "six", "seven"]) == 1  # room for five waiting texts
    e.end_ahead()
    assert e._ahead is None and started[0].pending == {}
    e.encode(["one", "six"])
    assert own.texts[-2:] == ["one", "six"]  # ended: encode does the work itself


def test_a_model_the_numpy_encoder_does_not_run_is_not_embedded_ahead(ahead, monkeypatch):
    e, own, helper, started = ahead
    monkeypatch.setattr(bert, "supports", lambda path: False)
    assert e.encode_ahead(["one", "two", "three"]) == 0 and not started


def test_a_failing_helper_leaves_the_work_to_encode(ahead, caplog):
    e, own, helper, started = ahead
    helper.fail = True
    assert e.encode_ahead(["one", "two", "three"]) == 3
    with caplog.at_level(logging.WARNING, logger="localpager"):
        vectors = e.encode(["two", "one"])
    assert "embedding ahead failed" in caplog.text
    assert own.texts == ["two", "one"] and vectors.shape == (2, 384)
    assert e._ahead is None


def test_an_ingest_to_be_embedded_hands_over_the_turns_prepare_embeds(fake_pager, tmp_path):
    from localpager.lab.synthetic import generate_dataset
    from localpager.store.loaders import dump_jsonl

    class Recording(HashEmbedder):
        def __init__(self):
            super().__init__()
            self.ahead: list[str] = []

        def encode_ahead(self, texts):
            self.ahead += texts
            return len(texts)

    source = tmp_path / "conversations.jsonl"
    dump_jsonl(generate_dataset(2, seed=3, n_turns=120), source)
    embedder = Recording()
    lp = fake_pager(embedder=embedder, path=tmp_path / "s.db")
    report = lp.ingest(source, embed=True)
    evicted = [t.text for conv_id in report.ids for p in lp.conversation(conv_id).pager.evicted
               for t in (lp.conversation(conv_id).pager.turns[i] for i in p.turn_range) if t.text]
    assert embedder.ahead == evicted and evicted
    lp.ingest(source, embed=False, replace=True)
    assert embedder.ahead == evicted  # not asked: nothing handed over
