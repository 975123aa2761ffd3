"""Issue 40: ``user_facts.across`` keeps what it worked out (benchmarks/user_scale.py: 70 ms of a first answer for a
user of 50 conversations) and works the order out again only when some conversation's facts, or the user's
conversations, changed, in this process or another; what it returns is the caller's own. On the fakes."""

from __future__ import annotations

import pytest

from localpager.memory import user_facts
from localpager.memory.user_facts import across

pytestmark = pytest.mark.both_stores

UTRECHT = "I live in Utrecht with my partner."
LYON = "We live in Lyon now, since the move."


@pytest.fixture
def worked(monkeypatch):
    """How many times ``across`` worked the order out."""
    calls = []
    real = user_facts._across

    def counting(per_conversation):
        calls.append(1)
        return real(per_conversation)

    monkeypatch.setattr(user_facts, "_across", counting)
    return calls


def told(lp, conv_id: str, *texts: str):
    chat = lp.conversation(conv_id, create=True, user="alice")
    for text in texts:
        chat.add_turn("user", text)
        chat.add_turn("assistant", "Noted.")
    return chat


def texts(facts) -> list[tuple[str, str, bool]]:
    return [(f.conv_id, f.text, f.current) for f in facts]


def test_across_works_again_only_when_facts_change(fake_pager, store_location, worked):
    lp = fake_pager()
    told(lp, "mon", UTRECHT)
    first, replaced = across(lp.store, "alice")
    assert texts(first) == [("mon", UTRECHT, True)] and replaced == {} and len(worked) == 1
    again, _ = across(lp.store, "alice")
    assert again == first and len(worked) == 1
    again[0].text = "scribbled"  # the caller's own copy: never what the next call returns
    assert texts(across(lp.store, "alice")[0]) == [("mon", UTRECHT, True)]
    told(lp, "tue", "Any tips for ironing shirts?")  # a new conversation stating nothing: the same facts
    assert texts(across(lp.store, "alice")[0]) == [("mon", UTRECHT, True)] and len(worked) == 1
    other = fake_pager(path=store_location)  # another process's change is seen
    other.conversation("tue", user="alice").add_turn("user", LYON)
    facts, replaced = across(lp.store, "alice")
    assert texts(facts) == [("mon", UTRECHT, False), ("tue", LYON, True)] and len(worked) == 2
    assert replaced == {("mon", 1): ("tue", 1)}
    lp.conversation("tue").forget(match="Lyon")
    assert texts(across(lp.store, "alice")[0]) == [("mon", UTRECHT, True)]
    lp.conversation("mon").pin_fact(1)
    assert [f.pinned for f in across(lp.store, "alice")[0]] == [True]
    lp.forget_conversation("mon")
    assert across(lp.store, "alice")[0] == []
    assert across(lp.store, "bob")[0] == []
