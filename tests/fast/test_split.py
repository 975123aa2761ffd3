"""The eval's split mode (issue 40, ``lab.split``): a conversation told over several chats of one user, asked in a
new one. The cuts on hand-made turns; a run on the fakes (the scripted model, the hashing embedder)."""

from __future__ import annotations

from localpager.core.records import Probe, Transcript, Turn
from localpager.lab.split import cut_points, part_of, parts


def chat(n: int, times: list[str] | None = None) -> list[Turn]:
    return [Turn("user" if i % 2 == 0 else "assistant", f"turn {i}", i, time=times[i] if times else None)
            for i in range(n)]


def test_a_chat_without_times_is_cut_at_exchanges_into_parts_of_about_one_length():
    turns = chat(12)
    assert cut_points(turns, 3) == [4, 8]
    split = parts("c", turns, 3)
    assert [(p.conv_id, p.start, p.stop) for p in split] == [("c#1", 0, 4), ("c#2", 4, 8), ("c#3", 8, 12)]
    assert part_of(split, 9) == (split[2], 1)
    assert all(turns[p.start].role == "user" for p in split)


def test_a_transcript_is_cut_only_where_a_session_begins():
    times = ["1 May"] * 5 + ["8 May"] * 2 + ["9 May"] * 5
    assert cut_points(chat(12, times), 2) == [5]  # the session start nearest the middle
    assert cut_points(chat(12, times), 3) == [5, 7]
    assert [(p.start, p.stop) for p in parts("c", chat(12, times), 5)] == [(0, 5), (5, 7), (7, 12)]  # 3 sessions


def test_one_part_or_too_few_turns_is_no_cut():
    assert cut_points(chat(12), 1) == [] and cut_points(chat(1), 3) == []
    assert [(p.start, p.stop) for p in parts("c", chat(6), 1)] == [(0, 6)]


def test_split_mode_stores_the_parts_under_one_user_and_asks_in_a_new_chat_of_theirs(fake_pager, monkeypatch):
    from localpager.lab import evaluate as ev

    turns = [Turn("user", "Can you recommend a film?", 0), Turn("assistant", "Try Arrival.", 1),
             Turn("user", "My gym locker is number 41.", 2), Turn("assistant", "Noted.", 3),
             Turn("user", "Pancakes or waffles?", 4), Turn("assistant", "Pancakes.", 5)]
    probe = Probe("What number is my gym locker?", ["41"], [2], "number", extra={"kind": "gym_locker"})
    conv = Transcript("c", turns, [probe])
    lp = fake_pager(["Your gym locker is number 41."] * 4)
    seen = []
    real_ask = ev._ask
    monkeypatch.setattr(ev, "_ask", lambda lp_, chat_, *a: seen.append(chat_.id) or real_ask(lp_, chat_, *a))
    results = ev._evaluate_split(lp, conv, ev.EvalConfig(split=3, oracle=False), ev.PagingConfig(), None)
    assert [(c.id, c.user, c.turns) for c in lp.conversations()] == [
        ("c#1", "c", 2), ("c#2", "c", 2), ("c#3", "c", 2), ("c#new", "c", 0)]
    assert seen == ["c#new"] and len(results) == 1 and results[0].score == 1.0
    assert results[0].output.startswith("You told me") and "locker" in results[0].output  # the fact of c#2
