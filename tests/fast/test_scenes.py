"""A statement set in a made-up world is no standing fact and replaces none (issue 38, item 2: "a hypothetical");
one set in the speaker's own world in the same frame stays one.

The sentences here were written for these tests: the scene model (``core.scenes``) was fitted on
``lab/data/scenes_train.json`` and measured on ``scenes_check.json``, never on these. Each made-up one was a fact
before the model read it (``test_each_made_up_sentence_here_reads_as_a_fact_without_the_scene_model``), so every
assertion below could fail. The model reads the real parser and the default embedder's real word vectors.
"""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localpager.core import facts as facts_module
from localpager.core import word_vectors as word_vectors_module
from localpager.core.facts import extract, facts_of
from localpager.core.records import Turn
from localpager.core.scenes import SceneModel, imagined, shipped_model
from localpager.core.syntax import scenes
from localpager.core.word_vectors import default_vectors

MADE_UP = [
    "In the radio drama, my husband is called Tobias.",
    "In the novel I'm editing, I'm allergic to penicillin.",  # the clause after the scene read as the main verb's
    "In our make-believe game, I live in Madrid.",
    "For the sci-fi anthology, I'm a diabetic astronaut.",
    "My character in the role-playing session is allergic to garlic.",  # the scene describes the subject
]
REAL = [
    "At work, my desk is on the fourth floor.",
    "At work, I'm the only one who speaks German.",
    "In my house, the wifi password is Meadow42.",
    "On Fridays, I work from home.",
    "For example, I can't eat shellfish.",  # a scene by its parse, of the speaker's own world
    "In winter, I swim in the sea every Sunday.",
    "My brother in Leeds is a plumber.",
]


def user(text: str, index: int = 0) -> Turn:
    return Turn(role="user", text=text, index=index)


@pytest.mark.parametrize("sentence", MADE_UP)
def test_a_statement_set_in_a_made_up_world_is_no_fact(sentence):
    assert imagined(sentence)
    assert extract(user(sentence)) == []


@pytest.mark.parametrize("sentence", REAL)
def test_a_statement_set_in_the_speakers_own_world_stays_a_fact(sentence):
    assert not imagined(sentence)
    assert extract(user(sentence))


def test_each_made_up_sentence_here_reads_as_a_fact_without_the_scene_model(monkeypatch):
    """The tests above could fail: without the scene reading, every made-up sentence here was a fact."""
    monkeypatch.setattr(facts_module, "imagined", lambda sentence, user=True: False)
    facts_module._extract.cache_clear()
    try:
        assert all(extract(user(s)) for s in MADE_UP)
    finally:
        facts_module._extract.cache_clear()


def test_a_made_up_change_replaces_no_fact():
    facts = facts_of([user("I'm badly allergic to sesame.", 0),
                      user("In my screenplay, I'm not allergic to sesame anymore.", 1)])
    assert [f.turn for f in facts if f.current and "sesame" in f.text] == [0]


def test_a_transcripts_speaker_opening_with_a_made_up_scene_states_no_fact():
    said = Turn(role="user", text="In my novel, my sister lives in Oslo.", index=0, speaker="Caroline")
    assert extract(said) == []
    assert extract(Turn(role="user", text="My sister lives in Oslo.", index=0, speaker="Caroline"))


def test_a_scene_is_the_preposition_that_sets_the_claim_not_any_preposition():
    assert [s.words for s in scenes("In my novel, the heroine is allergic to sesame.")] == ["In my novel"]
    assert scenes("I live in a novel little flat in Oslo.") == ()  # after the verb: where, not which world
    marks = scenes("In the radio drama I'm writing, my brother is a spy.")[0].marks
    assert marks == {"prep:in", "det:the", "described", "first"}


def test_without_the_word_vectors_no_scene_is_read_and_facts_are_kept(monkeypatch):
    monkeypatch.setattr(word_vectors_module, "default_vectors", lambda: None)
    assert not imagined("In my novel, the heroine is allergic to sesame.")


def test_the_word_vectors_tell_a_made_up_scene_from_a_real_one_by_meaning():
    """The noun's word vector carries the meaning: the same frame with another noun reads the other way."""
    model, vectors = shipped_model(), default_vectors()
    assert vectors is not None
    assert model.imagined("In my radio drama, I live in Oslo.", vectors=vectors)
    assert not model.imagined("In my flat, I live in Oslo.", vectors=vectors)
    assert np.allclose(vectors.of("novel"), vectors.of("novel"))


def test_a_model_with_no_weights_reads_nothing_as_made_up():
    vectors = default_vectors()
    empty = SceneModel(np.zeros(vectors.dimensions, dtype=np.float32), {}, -5.0, 0.5, frozenset({"in"}))
    assert not empty.imagined("In my novel, the heroine is allergic to sesame.", vectors=vectors)


def test_the_training_and_check_sentences_are_apart_and_labelled_once():
    data = {name: json.loads(resources.files("localpager.lab").joinpath("data", f"scenes_{name}.json").read_text())
            for name in ("train", "check")}
    for d in data.values():
        assert d["about"] and d["imagined"] and d["real"]
        assert not set(d["imagined"]) & set(d["real"])
    train = set(data["train"]["imagined"] + data["train"]["real"])
    assert not train & set(data["check"]["imagined"] + data["check"]["real"])
    assert not train & set(MADE_UP + REAL)


_WORDS = st.sampled_from(["In", "my", "novel", ",", "I", "'m", "a", "pilot", "for", "the", "game", "at", "work",
                          "is", "allergic", "to", "sesame", "?", ":", "\n", "\u00e9", "character"])


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.text(max_size=200), st.lists(_WORDS, max_size=30).map(" ".join)))
def test_any_text_reads_as_made_up_or_not_and_extracts_without_error(text):
    assert imagined(text) in (True, False)
    assert imagined(text, user=False) in (True, False)
    assert isinstance(extract(user(text)), list)
