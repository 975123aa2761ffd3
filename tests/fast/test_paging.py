"""Boundary policies, eviction policies, bookmarks and the pager's budget (with the real tokenizer:
tests/model/test_paging.py)."""

from __future__ import annotations

import pytest
from helpers import chatter

from localpager.core.bookmarks import FORMATS, render_bookmark
from localpager.core.boundaries import get_boundary, split_pages
from localpager.core.choices import Boundary
from localpager.core.eviction import POLICIES, get_eviction
from localpager.core.pager import Pager, PagingConfig, page_conversation
from localpager.core.records import Page, Turn
from localpager.core.tokens import ApproxTokenCounter


def make_turns(texts):
    return [Turn(role="user" if i % 2 == 0 else "assistant", text=t, index=i) for i, t in enumerate(texts)]


# -- boundaries --------------------------------------------------------------------------------
@pytest.mark.parametrize("name,size", [("fixed_5", 5), ("fixed_10", 10), ("fixed_20", 20)])
def test_fixed_pages_have_fixed_size(name, size):
    ranges = split_pages(chatter(47), get_boundary(name))
    assert [len(r) for r in ranges[:-1]] == [size] * (len(ranges) - 1)
    assert sum(len(r) for r in ranges) == 47
    assert ranges[-1].stop == 47


def test_exchange_pages_hold_five_user_turns():
    turns = make_turns(["q", "a", "q", "a", "a"] * 6)  # some exchanges have two assistant turns
    ranges = split_pages(turns, get_boundary("exchange_5"))
    for r in ranges:
        assert turns[r.start].role == "user"
        assert sum(turns[i].role == "user" for i in r) <= 5
    assert sum(turns[i].role == "user" for i in ranges[0]) == 5


def test_topic_shift_splits_where_the_topic_changes():
    cooking = [f"the pasta sauce needs garlic tomato basil and olive oil step {i}" for i in range(8)]
    rocket = [f"the rocket engine thrust nozzle fuel oxidizer combustion test {i}" for i in range(8)]
    turns = make_turns(cooking + rocket)
    ranges = split_pages(turns, get_boundary("topic_shift"))
    assert [r.start for r in ranges] == [0, 8]


def test_topic_shift_bounds_page_size():
    same = make_turns(["the same words again and again"] * 100)
    assert max(len(r) for r in split_pages(same, get_boundary("topic_shift"))) <= 30


def test_pages_never_change_when_the_conversation_grows():
    turns = chatter(60)
    for name in Boundary:
        policy = get_boundary(name)
        full = split_pages(turns, policy)
        partial = split_pages(turns[:37], policy)
        assert full[: len(partial) - 1] == partial[:-1], name


def test_unknown_boundary_is_a_clear_error():
    with pytest.raises(ValueError, match="fixed_20"):
        get_boundary("fixed_banana")


# -- eviction ----------------------------------------------------------------------------------
def pages_with_use():
    # (page_id, last_turn, accesses, last_access)
    spec = [(1, 9, 5, 90), (2, 19, 0, -1), (3, 29, 1, 95), (4, 39, 2, 50)]
    return [Page(page_id=i, first_turn=l - 9, last_turn=l, access_count=a, last_access=la) for i, l, a, la in spec]


def test_fifo_evicts_oldest_first():
    assert [p.page_id for p in get_eviction("fifo").order(pages_with_use(), 100)] == [1, 2, 3, 4]


def test_lru_evicts_least_recently_used_first():
    assert [p.page_id for p in get_eviction("lru").order(pages_with_use(), 100)] == [2, 4, 1, 3]


def test_lfu_evicts_least_used_first():
    assert [p.page_id for p in get_eviction("lfu").order(pages_with_use(), 100)] == [2, 3, 4, 1]


def test_hybrid_weighs_frequency_against_age():
    order = [p.page_id for p in get_eviction("hybrid").order(pages_with_use(), 100)]
    assert order[0] == 2  # never used, oldest creation
    assert order[-1] == 1  # used five times, recently


def test_unknown_eviction_is_a_clear_error():
    with pytest.raises(ValueError, match="lru"):
        get_eviction("random-ish")


# -- bookmarks ---------------------------------------------------------------------------------
def test_bookmark_formats():
    page = Page(page_id=3, first_turn=40, last_turn=59, keywords=["allergy", "peanut", "ER"],
                text="user: I have a peanut allergy, ended up in the ER once.\nassistant: Noted.")
    assert render_bookmark(page, "id") == "[p3]"
    assert render_bookmark(page, "minimal") == "[p3:allergy,peanut,ER]"
    assert render_bookmark(page, "structured") == "[p3:t=40-59;e=allergy,peanut,ER]"
    medium = render_bookmark(page, "medium")
    assert medium.startswith("[p3:allergy,peanut,ER \"I have a peanut allergy")
    assert set(FORMATS) == {"id", "minimal", "medium", "structured"}


def test_keywords_cannot_break_the_bookmark_syntax():
    page = Page(page_id=1, first_turn=0, last_turn=0, keywords=["a,b", "x]y", "k:v"])
    rendered = render_bookmark(page, "minimal")
    assert rendered.count("[") == 1 and rendered.count("]") == 1 and rendered.count(":") == 1


# -- the pager ---------------------------------------------------------------------------------
def test_budget_is_enforced_with_watermarks():
    config = PagingConfig(boundary="fixed_5", budget=200, low_watermark=0.5)
    pager = Pager(ApproxTokenCounter(), config)
    high_seen = 0
    for turn in chatter(120):
        change = pager.add_turn(turn)
        if change.evicted:
            assert pager.memory_tokens() <= 0.5 * 200 or len(pager.evictable()) == 0
        assert pager.memory_tokens() <= 200 or not pager.evictable()  # over the budget only if nothing can leave
        high_seen = max(high_seen, pager.memory_tokens())
    assert 0.5 * 200 < high_seen <= 200  # memory fills up to the high watermark, not just the low one
    assert pager.evicted and pager.resident
    assert pager.memory_tokens() <= 200 + max(p.token_count for p in pager.pages)


def test_evictions_come_in_batches():
    pager = Pager(ApproxTokenCounter(), PagingConfig(boundary="fixed_5", budget=300, low_watermark=0.5))
    batches = [len(pager.add_turn(t).evicted) for t in chatter(200)]
    nonzero = [b for b in batches if b]
    assert max(nonzero) >= 2  # a batch, not one page at a time
    assert len(nonzero) < sum(nonzero)


def test_pinned_and_newest_pages_are_never_evicted():
    pager = Pager(ApproxTokenCounter(), PagingConfig(boundary="fixed_5", budget=200))
    for turn in chatter(10):
        pager.add_turn(turn)
    assert not pager.evicted
    pager.pages[0].pinned = True
    for turn in chatter(200)[10:]:
        pager.add_turn(turn)
        assert not pager.pages[0].evicted
        assert not pager.pages[-1].evicted


@pytest.mark.parametrize("eviction", sorted(POLICIES))
def test_every_eviction_policy_pages_a_conversation(eviction):
    pager = page_conversation(chatter(150), ApproxTokenCounter(), PagingConfig(eviction=eviction, budget=300))
    assert pager.evicted and not pager.pages[-1].evicted
    assert all(p.keywords for p in pager.pages)


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="budget"):
        PagingConfig(budget=0)
    with pytest.raises(ValueError, match="bookmark format"):
        PagingConfig(bookmark_format="fancy")




@pytest.mark.parametrize("eviction", sorted(POLICIES))
def test_resident_and_evicted_read_every_page_as_it_is(eviction):
    """``resident`` and ``evicted`` skip the leading pages known evicted (ingest at 100,000 turns scanned 5,000
    pages several times a turn); they stay what a scan of every page says, whatever the policy evicts, with a
    pinned old page, touches, and ``pages`` replaced by a caller."""
    pager = Pager(ApproxTokenCounter(), PagingConfig(boundary="fixed_5", budget=200, eviction=eviction))
    for turn in chatter(300):
        pager.add_turn(turn)
        if turn.index == 12:
            pager.pages[1].pinned = True
        if turn.index % 17 == 0 and len(pager.pages) > 3:
            pager.touch([pager.pages[2].page_id], turn.index)
        assert pager.resident == [p for p in pager.pages if not p.evicted]
        assert pager.evicted == [p for p in pager.pages if p.evicted]
    assert pager.evicted and not pager.pages[1].evicted
    settled = pager.pages[: next(i for i, p in enumerate(pager.pages) if not p.evicted)]
    pager.pages = [*settled, Page(page_id=99, first_turn=0, last_turn=4), *pager.pages[len(settled):]]
    assert pager.resident[0].page_id == 99 and pager.evicted == [p for p in pager.pages if p.evicted]
    pager.pages = [Page(page_id=1, first_turn=0, last_turn=4), *pager.pages[1:]]  # a resident page in front again
    assert pager.resident[0].page_id == 1 and pager.evicted == [p for p in pager.pages if p.evicted]
    assert pager.page(3).page_id == 3 and pager.page(99).page_id == 99  # by id, wherever it is
