"""A user's lasting description of themselves and a habit named in no particular words are facts that answer, in
a new chat of theirs too, with the real embedder, parser and chat model; someone else's words they pass on are not
(issue 38). The lines are written for this test, none in the trait or habit models' training sentences."""

from __future__ import annotations

import pytest
from helpers import Recording

from localpager.memory.api import LocalPager
from localpager.runtime.settings import RecallSettings

pytestmark = [pytest.mark.embedder, pytest.mark.model]

LEFT = "Oh and I'm left-handed, which makes notebooks annoying."
DUCKS = "We keep ducks on the pond at the back."
FRIEND = "My friend wrote: I have two dogs and a cat."
SAID = ["Morning! Can you suggest a quick lunch?", LEFT, FRIEND, DUCKS, "I'm so tired today."]


def test_a_lasting_description_and_a_habit_answer_in_a_new_chat(tmp_path, backend):
    lp = LocalPager(tmp_path / "s.db", backend=Recording(backend), recall=RecallSettings(max_answer_tokens=24))
    first = lp.conversation("day1", create=True, user="sam")
    for text in SAID:
        first.add_turn("user", text)
        first.add_turn("assistant", "Got it.")
    assert [f.text for f in first.facts()] == ["I'm left-handed, which makes notebooks annoying.", DUCKS]
    second = lp.conversation("day2", create=True, user="sam")
    for question, line in (("Am I left-handed?", "I'm left-handed, which makes notebooks annoying."),
                           ("What birds do we keep?", DUCKS)):
        t = second.ask(question).trace
        assert t.decision == "fact" and t.facts[0]["text"] == line
        assert t.answer == f'You told me: "{line}"'
    lp.close()
