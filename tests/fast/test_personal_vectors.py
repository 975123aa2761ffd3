"""The personal-question reading from a question's meaning (``retrieval.personal_vectors``): what it reads and when
it stands down. Pure logic on a made-up embedder; the shipped model on the real one is in tests/model."""

from __future__ import annotations

import zlib

import numpy as np

from localpager.core.personal import asks_about_self
from localpager.retrieval.personal_vectors import PersonalQuestions, VectorQuestionModel, shipped_model


def _embed(texts: list[str]) -> np.ndarray:
    """A made-up embedder: a fixed random unit vector per text."""
    rows = [np.random.default_rng(zlib.crc32(t.encode())).normal(size=8) for t in texts]
    return np.array([r / np.linalg.norm(r) for r in rows], dtype=np.float32)


def _model(bias: float, probe: str = "Where do I live?") -> VectorQuestionModel:
    return VectorQuestionModel(np.zeros(8, dtype=np.float32), 0.0, bias, 0.5, probe, _embed([probe])[0])


def test_under_another_embedder_the_frame_model_alone_decides():
    other = VectorQuestionModel(np.zeros(384, dtype=np.float32), 0.0, 50.0, 0.5, "Where do I live?",
                                np.ones(384, dtype=np.float32) / np.sqrt(384))  # says yes to everything
    reader = PersonalQuestions(_embed, other)
    assert reader.model() is None  # the probe's vector is not this embedder's
    for q in ("What is the name of my accountant?", "What is the name of the tallest accountant in history?",
              "How do I tie a tie?", "Who is my doctor?"):
        assert reader.asks_about_self(q) == asks_about_self(q)


def test_the_vector_model_decides_a_question_only():
    yes, no = PersonalQuestions(_embed, _model(50.0)), PersonalQuestions(_embed, _model(-50.0))
    assert yes.model() is not None
    assert yes.asks_about_self("What is the capital of Peru?")  # the model says so for every question
    assert not no.asks_about_self("What is the name of my accountant?")
    assert not yes.asks_about_self("I live in Utrecht.")  # a statement asks nothing
    assert not yes.asks_about_self('Translate into German: "What\'s my sister\'s name?"')  # nor a quoted question


def test_the_shipped_model_is_there_with_its_probe():
    model = shipped_model()
    assert model is not None and model.probe and model.probe_vector is not None
    assert model.weights.shape == model.probe_vector.shape and 0.0 < model.threshold < 1.0
