"""A text a user hands over to work on, or someone's words they pass on, is no fact and no memory of theirs: in a new
chat of the same user, a question about them is not answered from it, with the real parser, embedder and chat
model; their own words after a request to keep them are (issue 38, items 2 and 5). The lines are written for this
test, none in the request model's training sentences."""

from __future__ import annotations

import pytest
from helpers import Recording

from localpager.memory.api import LocalPager
from localpager.runtime.settings import RecallSettings

pytestmark = [pytest.mark.embedder, pytest.mark.model]

TRANSLATE = "Translate to Portuguese: I am allergic to penicillin."
KEEP = "Remember this: my daughter is called Freya."
SAID = ["Hey, quick one before work.", TRANSLATE, "What's a good stretch for tight hamstrings?", KEEP,
        "My friend wrote: I have two dogs and a cat.", "Thanks, that's all for now."]


def test_a_text_handed_over_answers_nothing_about_the_user_in_a_new_chat(tmp_path, backend):
    lp = LocalPager(tmp_path / "s.db", backend=Recording(backend), recall=RecallSettings(max_answer_tokens=24))
    first = lp.conversation("day1", create=True, user="ana")
    for text in SAID:
        first.add_turn("user", text)
        first.add_turn("assistant", "Sure.")
    assert [f.text for f in first.facts()] == [KEEP]
    second = lp.conversation("day2", create=True, user="ana")
    t = second.ask("What's my daughter called?").trace
    assert t.decision == "fact" and t.answer == f'You told me: "{KEEP}"'
    for question in ("Am I allergic to anything?", "Do I have any dogs?"):
        t = second.ask(question).trace
        # whatever the path: no fact given, nothing of the handed-over words quoted or stated as the user's (before,
        # the first got 'You told me: "Translate to Portuguese: I am allergic to penicillin."')
        assert t.decision != "fact"
        assert "penicillin" not in t.answer.lower() and "wrote" not in t.answer and "two dogs" not in t.answer
    lp.close()
