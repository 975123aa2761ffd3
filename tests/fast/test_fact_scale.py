"""Standing facts at scale (issue 39): a new fact is compared only with the standing facts that share a word of
its slot (``core.facts.CurrentFacts``), and a store reads a conversation's standing facts once, not at every
turn, so the work grows with the number of facts, not with its square. Counted here, never timed (the seconds:
benchmarks/fact_scale.py). Which fact supersedes which stays what comparing every fact with every other gives."""

from __future__ import annotations

import random

import pytest

import localpager.store.base as store_base
from localpager.core import facts as facts_module
from localpager.core.facts import extract, facts_of, supersedes
from localpager.core.records import Turn

pytestmark = pytest.mark.both_stores  # the tests that take a store run on SQLite and on PostgreSQL

THINGS = ("laptop", "bike", "garden", "piano", "kitchen", "car", "flat", "tennis", "gym", "boat")
FOODS = ("sesame", "kiwi", "peanuts", "shellfish", "gluten")
PLACES = ("Porto", "Leeds", "Oslo", "Lyon")
STATEMENTS = (  # slots shared often, in several kinds, changed and not: what superseding has to tell apart
    "My gym locker is number {n}.", "I switched, my gym locker is now number {n}.",
    "My {a} budget is ${n}.", "Actually my {a} budget went up to ${n}.", "My budget for the {a} {b} is ${n}.",
    "I'm allergic to {f}.", "I'm also allergic to {f} and {g}.", "My dentist is Dr Ruiz, 555-01{n2}.",
    "Actually my dentist is now Dr Osei, 555-01{n2}.", "My {a} lesson is every Tuesday at {h}pm.",
    "My {a} lesson moved to Friday at {h}pm.", "The {a} {b} code is {n}.", "The {a} code changed to {n}.",
    "My favourite {a} is the {b} one.", "I live in {p}.", "I moved, I live in {p} now.",
    "My sister lives in {p}.", "I never eat {f}.", "I'm allergic to {f}. The {a} code is {n}.",
)


def statement(rng: random.Random) -> str:
    a, b = rng.sample(THINGS, 2)
    f, g = rng.sample(FOODS, 2)
    return rng.choice(STATEMENTS).format(a=a, b=b, f=f, g=g, p=rng.choice(PLACES), n=rng.randrange(100, 9999),
                                         n2=rng.randrange(10, 99), h=rng.randrange(1, 9))


def every_pair(facts, ids) -> dict[int, int]:
    """What ``superseded`` gave before issue 39: each fact compared with every fact still standing."""
    by, current = {}, []
    for fact_id, fact in zip(ids, facts):
        replaced = {old for old, older in current if supersedes(fact, older)}
        by.update(dict.fromkeys(replaced, fact_id))
        current = [c for c in current if c[0] not in replaced] + [(fact_id, fact)]
    return by


def stated(rng: random.Random, n: int) -> list[Turn]:
    """``n`` turns of facts, by the user and by two named speakers."""
    speakers = (None, None, "Ann", "Bo")
    return [Turn("user", statement(rng), i, speaker=rng.choice(speakers)) for i in range(n)]


@pytest.mark.parametrize("seed", range(8))
def test_superseding_by_slot_is_comparing_every_fact_with_every_other(seed):
    turns = stated(random.Random(seed), 300)
    facts = facts_of(turns)
    by = every_pair(facts, [f.fact_id for f in facts])
    assert len(by) > 30  # the case holds superseding, not only facts of slots of their own
    assert {f.fact_id: f.superseded_by for f in facts} == {f.fact_id: by.get(f.fact_id) for f in facts}


def counted(monkeypatch) -> list[int]:
    """Every ``supersedes`` call from here on, counted."""
    calls = [0]

    def counting(new, old):
        calls[0] += 1
        return supersedes(new, old)

    monkeypatch.setattr(facts_module, "supersedes", counting)
    return calls


def distinct(n: int) -> list[str]:
    """``n`` facts, each of a slot of its own but for a shared word in every group of four (so some are
    compared), none superseding another."""
    return [f"My favourite {word(i)} {word(i // 4 + 10_000)} is the one from before." for i in range(n)]


def word(n: int) -> str:
    return "".join("bcdfghjklm"[int(d)] + "aeiou"[int(d) % 5] for d in str(n)) + "x"


def test_superseding_compares_a_fact_with_its_slot_only(monkeypatch):
    calls = counted(monkeypatch)
    work = []
    for n in (400, 800):
        calls[0] = 0
        turns = [Turn("user", text, i) for i, text in enumerate(distinct(n))]
        assert all(f.current for f in facts_of(turns))
        work.append(calls[0])
    assert 0 < work[0] <= 3 * 400 and work[1] <= 2.2 * work[0]  # every fact with every other: 79,800 and 319,600


def add_pairs(chat, texts) -> None:
    for text in texts:
        chat.add_turn("user", text, stamp=False)
        chat.add_turn("assistant", "Noted.", stamp=False)


def test_a_store_reads_the_standing_facts_once_and_compares_each_new_fact_with_its_slot(fake_pager, monkeypatch):
    calls, reads = counted(monkeypatch), [0]

    class Counted(store_base.CurrentFacts):
        def __init__(self):
            reads[0] += 1
            super().__init__()

    monkeypatch.setattr(store_base, "CurrentFacts", Counted)
    lp = fake_pager()
    work = []
    for n in (60, 120):
        chat = lp.conversation(f"c{n}", create=True)
        calls[0] = reads[0] = 0
        add_pairs(chat, distinct(n))
        assert len(chat.facts()) == n
        work.append((calls[0], reads[0]))
    assert [r for _, r in work] == [1, 1]  # the first fact's turn reads them; every later turn's write keeps them
    assert 0 < work[0][0] <= 3 * 60 and work[1][0] <= 2.2 * work[0][0]
    calls[0] = 0
    chat.forget(turn=2 * 60)
    assert len(chat.facts()) == 119 and calls[0] <= 3 * 120  # a forget works superseding out again: by slot too


def turn_by_turn(turns: list[Turn], forgotten: dict[int, set[int]]) -> list[tuple[int, int, str, int | None]]:
    """The store's facts as the code before issue 39 made them: each turn's facts compared with every standing
    fact when it is stored (not with one another), and after a forget of turns (``forgotten``: {before which
    turn: the turns forgotten}) superseding worked out again from the facts left."""
    rows: list[list] = []  # fact_id, turn, draft, superseded_by
    for turn in turns:
        if turn.index in forgotten:
            rows = [r for r in rows if r[1] not in forgotten[turn.index]]
            by = every_pair([r[2] for r in rows], [r[0] for r in rows])
            for r in rows:
                r[3] = by.get(r[0])
        current = [(r[0], r[2]) for r in rows if r[3] is None]
        last = max((r[0] for r in rows), default=0)
        for n, draft in enumerate(extract(turn), start=last + 1):
            replaced = {old for old, older in current if supersedes(draft, older)}
            for r in rows:
                if r[0] in replaced:
                    r[3] = n
            current = [c for c in current if c[0] not in replaced]
            rows.append([n, turn.index, draft, None])
    return [(r[0], r[1], r[2].text, r[3]) for r in rows]


def test_two_writers_and_a_forget_leave_the_facts_comparing_every_fact_gives(fake_pager):
    """Two stores open on one conversation (as two processes), writing in turn, one forgetting: neither's kept
    standing facts are used once the other has changed the conversation."""
    rng = random.Random(7)
    texts = [statement(rng) for _ in range(48)]
    mine, theirs = fake_pager().conversation("c", create=True), fake_pager().conversation("c")
    forgotten: dict[int, set[int]] = {}
    for i, text in enumerate(texts):
        chat = mine if (i // 3) % 2 == 0 else theirs
        if i in (20, 35):
            gone = 2 * (i - 7)
            (theirs if chat is mine else mine).forget(turn=gone)
            forgotten[2 * i] = {gone}
        add_pairs(chat, [text])
    turns = [Turn("user", t, 2 * i) for i, t in enumerate(texts)]
    expected = turn_by_turn(turns, forgotten)
    stored = mine.facts(all=True)
    assert [(f.fact_id, f.turn, f.text, f.superseded_by) for f in stored] == expected
    assert sum(r[3] is not None for r in expected) > 5


def test_a_write_rolled_back_leaves_nothing_of_its_facts_in_memory(fake_pager, monkeypatch):
    lp = fake_pager()
    add_pairs(lp.conversation("c", create=True), ["My gym locker is number 12."])

    def killed(*_args):
        raise RuntimeError("killed after the facts were written")

    with monkeypatch.context() as patch:
        patch.setattr(lp.store, "_replace_unanswered", killed)
        with pytest.raises(RuntimeError):
            lp.store.append_turn("c", Turn("user", "I switched, my gym locker is now number 40.", 2), answers=(0, {}))
    lp.store.append_turn("c", Turn("user", "Actually my gym locker is now number 77.", 2))
    assert [(f.fact_id, f.text, f.superseded_by) for f in lp.store.facts("c")] == [
        (1, "My gym locker is number 12.", 2), (2, "Actually my gym locker is now number 77.", None)]
