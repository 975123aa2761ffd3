"""Whether a statement is set in a made-up world ("In my novel, the heroine is allergic to sesame.", "For the
role-play, I'm a pilot."): it says nothing of the speaker's own life, so it is no standing fact and replaces none.

Which scenes are made up cannot be listed: a user brings a screenplay, a D&D session or a thought experiment as
readily as a novel. The parse finds the preposition that sets a claim's scene (``syntax.scenes``: one set before
the main clause's verb, or describing its subject) and how it is set (the preposition, "my" or "the", a clause
describing it); the default embedder's word vectors (``word_vectors``) say what its noun means, so "screenplay"
lies near "script" and "novel" though no training sentence holds it. A logistic model over both,
learned from labelled sentences (``lab/data/scenes_train.json``: made-up scenes against the speaker's own, "At
work, ...", "In my family, ...", "In real life, ...", with the scenes of every claim and fact the claim and fact
models are fitted on), says which scenes are made up. Refit with ``python benchmarks/scenes.py --fit`` (it writes
``core/data/scene_model.json`` and measures ``lab/data/scenes_check.json``, written apart). English only.

A chat user's fact sentence is parsed for its scenes: the parse ``facts._asks_work`` asked for is read again, but a
sentence that opens with its speaker ("I'm allergic to ...", "My sister ...") was not parsed before (of the
generated sets' 5,600 user turns, 338 sentences more are parsed: about 0.5-0.9 s of extraction, within the noise
of their whole ingest). A pronoun subject does not rule a scene out ("I love how my passion for fantasy stuff ..."
holds one in its inner clause), so there is no cheaper gate that reads the same. A transcript's line is parsed
only when it opens with a preposition the model saw set a made-up scene: its speakers state facts in a line of
nearly every four, and a parse of each would slow their ingest.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

from . import word_vectors
from .syntax import Scene, scenes

if TYPE_CHECKING:  # numpy loads with the first scene read: the CLI's help imports the extractor, not numpy
    import numpy as np

    from .word_vectors import WordVectors

MODEL_FILE = "scene_model.json"


@dataclass(frozen=True)
class SceneModel:
    """Weights over a scene's noun's word vector (``word_vectors``) and its marks (``syntax.Scene``), a bias, the
    threshold at or above which a scene is made up, and the prepositions the training sentences open a made-up
    scene with (a transcript's gate)."""

    weights: np.ndarray
    marks: dict[str, float]
    bias: float
    threshold: float
    openers: frozenset[str]

    def probability(self, scene: Scene, vectors: WordVectors) -> float:
        z = self.bias + float(self.weights @ vectors.of(scene.noun))
        z += sum(self.marks.get(mark, 0.0) for mark in scene.marks)
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    def imagined(self, text: str, user: bool = True, vectors: WordVectors | None = None) -> bool:
        """Whether a scene of ``text`` is made up; a transcript speaker's (``user`` False) read only when ``text``
        opens with one of ``openers``. ``vectors``: the default embedder's when not given (without them, none
        is)."""
        if not user and (text.split(maxsplit=1) or [""])[0].lower() not in self.openers:
            return False
        vectors = vectors or word_vectors.default_vectors()
        if vectors is None:
            return False
        return any(self.probability(scene, vectors) >= self.threshold for scene in scenes(text))

    def to_json(self) -> dict:
        return {"bias": self.bias, "threshold": self.threshold, "openers": sorted(self.openers),
                "marks": self.marks, "weights": [round(float(w), 6) for w in self.weights]}


@lru_cache(maxsize=1)
def shipped_model() -> SceneModel:
    """The fitted scene model shipped with the package (``core/data/scene_model.json``)."""
    import numpy as np

    data = json.loads(resources.files("localpager.core").joinpath("data", MODEL_FILE).read_text(encoding="utf-8"))
    return SceneModel(np.asarray(data["weights"], dtype=np.float32), data["marks"], data["bias"], data["threshold"],
                      frozenset(data["openers"]))


def imagined(text: str, user: bool = True) -> bool:
    """Whether ``text`` is set in a made-up world, by the shipped model (``SceneModel.imagined``)."""
    return shipped_model().imagined(text, user)
