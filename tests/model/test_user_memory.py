"""Issue 40 with the real SmolLM2 GGUF, the real embedder and the fitted models: what a user said in Monday's chat
answers a question in Tuesday's, cited with Monday's conversation; another user's chat gets none of it. The tests
check the decision, the citation and what reached the model, never one generated string."""

from __future__ import annotations

import pytest
from helpers import Recording

from localpager.memory.api import LocalPager
from localpager.runtime.prompts import NOT_REMEMBERED
from localpager.runtime.settings import RecallSettings

pytestmark = [pytest.mark.model, pytest.mark.embedder]

SESAME = "I'm seriously allergic to sesame, even a trace sets me off."


@pytest.fixture
def lp(tmp_path, backend):
    lp = LocalPager(tmp_path / "s.db", backend=Recording(backend), recall=RecallSettings(max_answer_tokens=24))
    mon = lp.conversation("mon", create=True, user="alice")
    for user, assistant in (("Any tips for keeping basil alive?", "Water it when the soil is dry."), (SESAME, "Noted."),
                            ("Pancakes or waffles?", "Pancakes: no special iron needed.")):
        mon.add_turn("user", user)
        mon.add_turn("assistant", assistant)
    yield lp
    lp.close()


def test_tuesdays_chat_answers_from_what_was_said_on_monday(lp):
    tue = lp.conversation("tue", create=True, user="alice")
    t = tue.ask("I'm packing snacks for a long flight. Anything I should stay away from?").trace
    assert t.decision == "fact" and t.answer == f'You told me: "{SESAME}"'
    assert [(c.conversation, c.turn) for c in t.citations] == [("mon", 2)]


def test_another_users_chat_knows_nothing_of_it(lp):
    bob = lp.conversation("bob-1", create=True, user="bob")
    t = bob.ask("Am I allergic to anything?").trace
    assert t.decision != "fact" and "sesame" not in t.answer.lower()
    assert t.answer == NOT_REMEMBERED  # a question about bob's own life, in a chat that holds nothing
    prompts = lp.backend.prompts + (lp.backend.side.prompts if lp.backend.side else [])
    assert all("sesame" not in lp.backend.inner.detokenize(p).lower() for p in prompts)
