"""Whether a question asks about its speaker's own life, read from its meaning as well as its frame.

``core.personal`` reads only a question's frame (its first words and stop words), so that what it is about weighs
nothing. A frame it never saw reads as a general question: "What society am I a member of?", "How does my partner
eat?" and "Did I tell you how much I can afford for an apartment?" went to the model's own answer, which invents.
The sentence embedder places a question near the questions it means alike, whatever their frame; so a logistic
model over the question's vector and the frame model's log-odds reads both. It is fitted on the same labelled
questions (``python benchmarks/personal_questions.py --fit``, which writes ``retrieval/data/personal_vectors.json``
and measures it on questions it never saw), and only for the embedder it was fitted with: the file keeps a probe
question and its vector, and another embedder's vector for it differs (the frame model alone then decides).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Callable

import numpy as np

from ..core.claims import asks_own, mask_quotes
from ..core.personal import personal_model
from .fact_pairs import same_embedder

MODEL_FILE = "personal_vectors.json"
FRAME_LOGIT = 8.0  # the frame model's log-odds, bounded: a frame it is sure of should not swamp the meaning


def frame_logit(question: str) -> float:
    """The frame model's log-odds that ``question`` (quotations masked) is personal, in [-FRAME_LOGIT, FRAME_LOGIT]."""
    p = min(max(personal_model().probability(question), 1e-6), 1 - 1e-6)
    return max(-FRAME_LOGIT, min(FRAME_LOGIT, math.log(p / (1 - p))))


@dataclass(frozen=True)
class VectorQuestionModel:
    """p = sigmoid(bias + weights . vector + frame * frame_logit), the vector L2-normalised; yes at ``threshold``."""

    weights: np.ndarray
    frame: float
    bias: float
    threshold: float
    probe: str = ""
    probe_vector: np.ndarray | None = None

    def probability(self, vector: np.ndarray, logit: float) -> float:
        z = self.bias + float(self.weights @ vector) + self.frame * logit
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    def fits(self, embed: Callable[[list[str]], np.ndarray]) -> bool:
        """Whether ``embed`` is the embedder the model was fitted with (its vector of the probe question)."""
        return same_embedder(embed, self.probe, self.probe_vector)

    def to_json(self) -> dict:
        return {"bias": self.bias, "frame": self.frame, "threshold": self.threshold, "probe": self.probe,
                "probe_vector": [round(float(x), 5) for x in self.probe_vector] if self.probe_vector is not None
                else [], "weights": [round(float(x), 5) for x in self.weights]}


def _unit(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-9)


def model_from(data: dict) -> VectorQuestionModel:
    probe = np.asarray(data.get("probe_vector") or [], dtype=np.float32)
    return VectorQuestionModel(np.asarray(data["weights"], dtype=np.float32), data["frame"], data["bias"],
                               data["threshold"], data.get("probe", ""), probe if len(probe) else None)


@cache
def shipped_model() -> VectorQuestionModel | None:
    """The model shipped in ``retrieval/data``, or None when it is not there."""
    try:
        text = resources.files("localpager.retrieval").joinpath("data", MODEL_FILE).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return model_from(json.loads(text))


class PersonalQuestions:
    """``asks_about_self`` for one embedder: the vector model where it was fitted with this embedder, else the frame
    model (``core.personal``) alone."""

    def __init__(self, embed: Callable[[list[str]], np.ndarray], model: VectorQuestionModel | None = None):
        self.embed = embed
        self._model = model
        self._checked = False
        self._said: dict[str, bool] = {}

    def model(self) -> VectorQuestionModel | None:
        if not self._checked:
            self._checked = True
            model = self._model or shipped_model()
            self._model = model if model is not None and model.fits(self.embed) else None
        return self._model

    def asks_about_self(self, message: str) -> bool:
        """Whether ``message`` is a question about its speaker's own life, with a question's form or as a request
        naming their things (``claims.asks_own``: "Tell me my rent ceiling."); quoted words masked, as the frame
        model reads it; a statement asks nothing."""
        if message not in self._said:
            if len(self._said) >= 256:
                self._said.clear()
            self._said[message] = self._reads(message)
        return self._said[message]

    def _reads(self, message: str) -> bool:
        text = mask_quotes(message[:600])
        if not asks_own(text):
            return False
        model = self.model()
        if model is None:
            return personal_model().is_claim(text)
        vector = _unit(np.asarray(self.embed([text]), dtype=np.float32)[0])
        return model.probability(vector, frame_logit(text)) >= model.threshold
