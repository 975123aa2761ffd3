"""Which standing fact a message needs, learned from examples: messages like this one needed a fact like that one.

The fact model (``retrieval.facts``) judges a message and its closest fact by their cosine and the message's form.
A message that needs a fact without naming it ("I'm charging a drink at the pool bar to my stay. What do I write
on the slip?" needs "The hotel gave me room 626.") is far from it by cosine, and from the general questions too.
What connects them is experience: people who ask that kind of thing need that kind of fact. The pair bank keeps
that experience as data: labelled messages (the tuning phrasing sets' explicit and implicit questions, each with
the statements of the fact it needs, and their general questions, which need none) as vectors of the embedder.

A message's pair score for a fact: its ``k`` nearest labelled messages, each weighing its cosine to the power
``power``; a neighbour that needs a fact adds its weight times that fact's statements' best cosine with the fact,
a general one adds nothing; the sum over the weights. A fact whose score reaches ``threshold`` bears on the
message, whatever the fact model says. Only a message for the asker's own sake is read (the bank's messages all
are: a transcript's question about someone else is not), and not one asking when something happened ("When did
I replace the chain on my bicycle?" came near "Where's my car?"): the day a turn told it answers that.

The bank also tells when a question needs a fact that memory never held (``unmet_by``): its nearest labelled
messages needed one, it is near them, and no fact meets it. Such a question is answered "not remembered" before
any recall (``runtime.recall``).

Written by ``python benchmarks/fact_pairs.py --fit``: the bank; its threshold, the lowest at which at most a
small share of the development sets' general and never-said questions get a fact by it; and the ``unmet``
cut-offs, which call at most a small share of their fact questions unmet. Each set is scored with a bank that
leaves its own messages out.

The vectors are the default embedder's (all-MiniLM-L6-v2), stored as bytes beside the texts; with another
embedder the bank stays off (its cosines, and so its threshold, mean nothing there).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Callable

import numpy as np

BANK_FILE = "fact_pairs.json"
VECTORS_FILE = "fact_pairs.npy"
SCALE = 127.0  # the stored vectors are int8: a normalized vector's components times this, rounded
SAME_EMBEDDER = 0.98  # the live vector of the bank's first message against the stored one: the same embedder


@dataclass
class PairBank:
    """Labelled messages and the statements of the facts they need, as unit vectors, and how they are read."""

    messages: np.ndarray  # (messages, dim)
    needs: np.ndarray  # per message: the index of its fact's statements, -1 for a general question
    statements: list[np.ndarray]  # per fact: its statements' vectors (statements, dim)
    k: int = 5
    power: float = 4.0
    threshold: float = 1.0
    probe: str = ""  # the bank's first message: its live vector tells whether the embedder is the bank's
    # When a message needs a fact memory never held (``unmet``): the share of its nearest messages' weight that
    # needed one and the nearest's cosine at least ``needed`` and ``nearest``, its best pair score and the fact
    # model's probability below ``paired`` and ``probability``. Empty: never.
    unmet: dict[str, float] = field(default_factory=dict)

    def _nearest(self, message: np.ndarray, leave_out: np.ndarray | None) -> tuple[np.ndarray, ...]:
        """The ``k`` nearest labelled messages (not those ``leave_out`` masks), their cosines and weights."""
        cosines = self.messages @ message
        if leave_out is not None:
            cosines = np.where(leave_out, -np.inf, cosines)
        near = np.argpartition(-cosines, self.k)[: self.k] if len(cosines) > self.k else np.arange(len(cosines))
        return near, cosines[near], np.maximum(cosines[near], 0.0) ** self.power

    def scores(self, message: np.ndarray, facts: np.ndarray, leave_out: np.ndarray | None = None) -> np.ndarray:
        """Each fact's pair score for ``message`` (unit vectors; ``facts``: facts × dim). ``leave_out``: a mask
        of bank messages not to read (the fitting scores a set with its own messages left out)."""
        near, cosines, weights = self._nearest(message, leave_out)
        total = np.zeros(len(facts))
        for j, weight in zip(near, weights):
            if self.needs[j] >= 0 and weight > 0:
                total += weight * (self.statements[self.needs[j]] @ facts.T).max(axis=0)
        return total / max(float(weights.sum()), 1e-9)

    def need_of(self, message: np.ndarray, leave_out: np.ndarray | None = None) -> tuple[float, float]:
        """How much ``message`` (a unit vector) needs a fact: the share of its ``k`` nearest labelled messages'
        weight that needed one, and the nearest one's cosine (how near it is to anything the bank knows)."""
        near, cosines, weights = self._nearest(message, leave_out)
        share = float(weights[self.needs[near] >= 0].sum() / max(float(weights.sum()), 1e-9))
        return share, float(cosines.max()) if len(cosines) else 0.0

    def unmet_by(self, needed: float, nearest: float, paired: float, probability: float) -> bool:
        """``unmet_by`` with this bank's cut-offs."""
        return unmet_by(self.unmet, needed, nearest, paired, probability)

    def misses(self, needed: float, nearest: float, paired: float) -> bool:
        """``misses`` with this bank's cut-offs."""
        return misses(self.unmet, needed, nearest, paired)

    def fits(self, embed: Callable[[list[str]], np.ndarray]) -> bool:
        """Whether ``embed`` is the embedder the bank's vectors come from."""
        return bool(len(self.messages)) and same_embedder(embed, self.probe, self.messages[0])


def same_embedder(embed: Callable[[list[str]], np.ndarray], probe: str, stored: np.ndarray | None) -> bool:
    """Whether ``embed`` gives ``probe`` the vector ``stored`` (a unit vector, as a fitted file keeps it): the
    embedder a model over its vectors was fitted with."""
    if not probe or stored is None:
        return False
    live = np.asarray(embed([probe]), dtype=np.float32)[0]
    if live.shape != stored.shape:
        return False
    live = live / max(float(np.linalg.norm(live)), 1e-9)
    return float(live @ stored) >= SAME_EMBEDDER


def unmet_by(cut: dict[str, float], needed: float, nearest: float, paired: float, probability: float) -> bool:
    """Whether a message that needs a fact this much (``PairBank.need_of``) gets none that meets it, by the
    cut-offs ``cut`` (``PairBank.unmet``; empty: never): the best pair score ``paired`` and the fact model's
    ``probability`` of its best match are both low. It asks for something never told, or forgotten."""
    return misses(cut, needed, nearest, paired) and probability < cut["probability"]


def misses(cut: dict[str, float], needed: float, nearest: float, paired: float) -> bool:
    """Whether a fact whose pair score is ``paired`` is unlike every fact the message's nearest labelled messages
    needed, where those needed one and are near it (``unmet``'s cut-offs but the fact model's): the bank knows what
    such a message asks for, and this fact is not it, whatever its cosine and asked type say ("On what day does my
    relative tie the knot?" and "The team sync happens every Monday.")."""
    return bool(cut) and needed >= cut["needed"] and nearest >= cut["nearest"] and paired < cut["paired"]


def bank_from(data: dict, vectors: np.ndarray) -> PairBank:
    """A bank from its file's records (``data``) and the vectors of its messages, then of every statement."""
    messages = data["messages"]
    sizes = [len(group) for group in data["statements"]]
    unit = vectors.astype(np.float32) / SCALE
    unit /= np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-9)
    ends = np.cumsum([len(messages), *sizes])
    return PairBank(messages=unit[: len(messages)], needs=np.array([-1 if m[1] is None else m[1] for m in messages]),
                    statements=[unit[a:b] for a, b in zip(ends[:-1], ends[1:])], k=data["k"], power=data["power"],
                    threshold=data["threshold"], probe=messages[0][0] if messages else "",
                    unmet=dict(data.get("unmet", {})))


def quantized(vectors: np.ndarray) -> np.ndarray:
    """Unit vectors as the bank stores them."""
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    return np.round(unit * SCALE).astype(np.int8)


@cache
def shipped_bank() -> PairBank | None:
    """The bank shipped in ``retrieval/data``, or None when it is not there."""
    folder = resources.files("localpager.retrieval").joinpath("data")
    try:
        data = json.loads(folder.joinpath(BANK_FILE).read_text(encoding="utf-8"))
        with folder.joinpath(VECTORS_FILE).open("rb") as f:
            vectors = np.load(f)
    except FileNotFoundError:
        return None
    return bank_from(data, vectors)
