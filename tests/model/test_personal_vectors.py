"""Issue 38 (5): a question about the user's own life is read as one from its meaning too (``personal_vectors``),
on the real embedder: questions written for this test, in frames the training questions do not use, each beside a
general question on the same subject (a question about oneself must reach memory; one about the world must not)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from localpager.core.personal import asks_about_self
from localpager.retrieval.embedder import default_embedder
from localpager.retrieval.personal_vectors import PersonalQuestions

pytestmark = pytest.mark.embedder

PAIRS = [  # (about the speaker, about the world)
    ("Which choir do I sing with on Thursdays?", "Which choir is the oldest in Europe?"),
    ("Remind me, what colour is the car I drive?", "What colour cars are the safest?"),
    ("How many siblings do I have?", "How many siblings did Mozart have?"),
    ("Where did I say my grandparents were born?", "Where were the Beatles born?"),
    ("What shoe size am I?", "How do shoe sizes differ between the UK and US?"),
    ("Which bank holds my mortgage?", "How do mortgages work?"),
    ("Which hand do I write with?", "Why are most people right-handed?"),
    ("What religion was I raised in?", "What religion is most common in Brazil?"),
    ("What kind of boiler is in our flat?", "What kind of boiler is most efficient?"),
    ("In which town did my wife grow up?", "In which town was Shakespeare born?"),
    ("How old is our house?", "How old is the oldest house in England?"),
    ("Which charity do we give to each month?", "Which charities are the most efficient?"),
    ("What did my daughter decide to study?", "What should a first-year student study?"),
    ("Who cuts my hair these days?", "How often should I get a haircut?"),
]


@pytest.fixture(scope="module")
def reader() -> PersonalQuestions:
    return PersonalQuestions(default_embedder().encode)


def test_the_shipped_model_fits_the_default_embedder(reader):
    assert reader.model() is not None


def test_questions_about_oneself_reach_memory_and_questions_about_the_world_do_not(reader):
    mine = [reader.asks_about_self(p) for p, _ in PAIRS]
    world = [reader.asks_about_self(g) for _, g in PAIRS]
    assert sum(mine) >= len(PAIRS) - 1 and sum(world) <= 1, (mine, world)
    frame_world = sum(asks_about_self(g) for _, g in PAIRS)  # the frame alone reads "Where were ... born?" as mine
    assert sum(world) < frame_world


def test_the_written_check_questions(reader):
    data = json.loads(resources.files("localpager.lab").joinpath("data", "personal_check.json").read_text("utf-8"))
    found = sum(map(reader.asks_about_self, data["personal"])) / len(data["personal"])
    wrong = sum(map(reader.asks_about_self, data["general"])) / len(data["general"])
    assert found >= 0.9 and wrong <= 0.05, (found, wrong)
