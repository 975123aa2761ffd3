"""Paging with the real tokenizer: pages count SmolLM2's tokens, and the listed bookmarks of a long conversation
keep to their share of the budget (the rest of paging: tests/fast/test_paging.py)."""

from __future__ import annotations

import pytest
from helpers import chatter

from localpager.core.pager import PagingConfig, page_conversation


@pytest.mark.model
def test_pages_count_tokens_with_the_models_tokenizer(counter):
    pager = page_conversation(chatter(45), counter, PagingConfig(budget=10_000))
    page = pager.pages[0]
    expected = sum(counter.count(pager.turns[i].render()) + 5 for i in page.turn_range)
    assert page.token_count == expected
    assert counter.count("hello world") == 2  # SmolLM2's BPE, not a character estimate


@pytest.mark.model
def test_listed_bookmarks_stay_within_their_share_of_the_budget(counter):
    turns = chatter(3200)
    pager = page_conversation(turns, counter, PagingConfig(budget=512, bookmark_share=0.4))
    listed = pager.listed
    assert len(pager.evicted) == 159 and 0 < len(listed) < 40
    assert sum(pager.bookmark_tokens(p) for p in listed) <= 0.4 * 512
    assert listed == pager.evicted[-len(listed):]  # the newest evicted pages
