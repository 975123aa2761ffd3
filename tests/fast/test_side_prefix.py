"""Kept prefixes of focused answers (issue 26, item 4) without a model: what the runtime asks the side context
to keep, the least-recently-used store of saved prefixes, and the bench's paging-to-truncation ratio."""

from __future__ import annotations

from fakes import ScriptedBackend

from localpager.backends.llama import KeptPrefixes
from localpager.lab.bench import BenchConfig, TurnTiming, report_line, summarize
from localpager.runtime.trace import STAGES
from localpager.runtime.prefixes import kept_parts
from localpager.runtime.prompts import answer_messages

NOTES = "[8 May 2023] user: My sister moved to Lisbon."


class KeepingBackend(ScriptedBackend):
    keeps_prefixes = True


def test_kept_parts_end_before_the_notes_and_before_the_question():
    backend = KeepingBackend()
    prompt = backend.render(answer_messages("focused", NOTES, "Where did she move?"))
    fixed, with_notes = kept_parts(backend, "focused", NOTES, [], prompt)
    assert backend.detokenize(prompt[:fixed]).rstrip().endswith("From earlier in this conversation:")
    assert backend.detokenize(prompt[:with_notes]).rstrip().endswith("Question:")
    assert "Lisbon" in backend.detokenize(prompt[fixed:with_notes])


def test_a_backend_that_keeps_nothing_is_asked_nothing():
    backend = ScriptedBackend()
    prompt = backend.render(answer_messages("focused", NOTES, "Where?"))
    assert kept_parts(backend, "focused", NOTES, [], prompt) == ()


def test_kept_prefixes_restore_the_longest_and_drop_the_least_recently_used():
    kept = KeptPrefixes(capacity=2)
    kept.add((1, 2), b"a")
    kept.add((1, 2, 3, 4), b"b")
    assert kept.longest([1, 2, 3, 4, 5], than=1) == ((1, 2, 3, 4), b"b")
    assert kept.longest([1, 2, 3, 9], than=1) == ((1, 2), b"a")
    assert kept.longest([1, 2, 3, 9], than=2) is None  # the live cache holds as much already
    assert kept.longest([1, 2], than=0) == ((1, 2), b"a")
    kept.add((7,), b"c")  # (1, 2) was used last: (1, 2, 3, 4) goes
    assert (1, 2) in kept and (1, 2, 3, 4) not in kept and len(kept) == 2
    kept.clear()
    assert len(kept) == 0


def test_kept_prefixes_stay_within_their_bytes():
    """A bigger model's prefixes take more memory a token: the bound in bytes keeps fewer of them."""
    kept = KeptPrefixes(capacity=100, max_bytes=10)
    for i in range(5):
        kept.add((i,), b"xxxx")
    assert len(kept) == 2 and kept.nbytes == 8 and (4,) in kept and (3,) in kept
    kept.add((9,), b"y" * 50)  # larger than the bound alone: kept, the others go
    assert len(kept) == 1 and kept.nbytes == 50
    kept.add((9,), b"z")  # replaced: counted once
    assert kept.nbytes == 1


def timing(strategy: str, length: int, ms: float) -> TurnTiming:
    return TurnTiming(strategy=strategy, length=length, needs_recall=False, total_ms=ms, floor_ms=ms, ttft_ms=ms,
                      evaluated=1, generated=1, stages=dict.fromkeys(STAGES, 1.0))


def test_bench_reports_paging_over_truncation_p50():
    config = BenchConfig(quick=True)
    timings = [timing(s, n, ms) for n in config.lengths for s, ms in
               (("paging", 300.0), ("paging", 500.0), ("truncation", 200.0), ("truncation", 250.0),
                ("full", 400.0), ("full", 400.0))]
    summary = summarize(timings, config)
    assert summary["paging_vs_truncation_p50"] == 2.0
    assert summary["paging_vs_truncation_p50_by_length"] == {str(n): 2.0 for n in config.lengths}
    assert report_line(summary).startswith("paging_vs_truncation_p50: 2.0 (50 turns 2.0")
