"""Issue 39 (d): a bookmark is an index of what its page holds, so it keeps a value a later turn replaced (the page
still holds the statement, and is found by it), while answers get the newest value; a correction (the old
statement was wrong) rebuilds the bookmark without it. docs/how-it-works.md#paging. On the fakes: a second."""

from __future__ import annotations

from localpager.core.pager import PagingConfig

OLD = "The code for our building's front door is 4471."
NEW = "Actually, the code for our front door is now 5012."
TALK = [("user", OLD), ("assistant", "Got it."), ("user", "I water the ferns on Sundays."), ("assistant", "Nice."),
        ("user", NEW), ("assistant", "Noted."), ("user", "The piano lessons start next week."),
        ("assistant", "Practice daily."), ("user", "The kitchen budget is tight."), ("assistant", "Cook at home.")]


def test_the_bookmark_keeps_a_replaced_value_and_answers_get_the_newest(fake_pager):
    lp = fake_pager()
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_2", budget=120))
    for role, text in TALK:
        chat.add_turn(role, text, stamp=False)
    old_page = chat.pager.page_of_turn(0)
    assert old_page.evicted, "the precondition of this test"
    assert "4471" in chat.pager.bookmark(old_page)  # what the page holds
    assert chat.search("4471", 1)[0].turn == 0  # and the page is found by it
    assert [f.text for f in chat.facts() if "code" in f.text] == [NEW]  # the prompt's standing fact: the newest
    answer = chat.ask("What is the code for our front door?")
    assert "5012" in answer.answer and "4471" not in answer.answer

    chat.correct(0, "The code for our building's front door is 5012.")  # the old statement was wrong
    assert "4471" not in chat.pager.bookmark(chat.pager.page_of_turn(0))
