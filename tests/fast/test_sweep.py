"""localpager.lab.sweep: which runs an ``eval`` makes and how they are named, and the simulator's report."""

from __future__ import annotations

import json

import pytest

from localpager.core.pager import PagingConfig
from localpager.lab.evaluate import EvalConfig
from localpager.lab.simulate import Cell, SimulationResult
from localpager.lab.sweep import EvalSweep, run_eval_sweep, simulation_report, write_simulation


def test_one_run_per_combination_named_by_the_settings_that_vary():
    sweep = EvalSweep(["bookmarks", "bm25"], ["fifo"], ["heuristic", "tfidf"], ["focused"],
                      PagingConfig(budget=300, boundary="fixed_10"), EvalConfig(limit=2, oracle=False))
    runs = sweep.runs()
    assert [name for name, _ in runs] == ["bookmarks keywords=heuristic", "bookmarks keywords=tfidf",
                                          "bm25 keywords=heuristic", "bm25 keywords=tfidf"]
    name, config = runs[3]
    assert (config.strategy, config.paging.keywords, config.paging.eviction, config.layout) == ("bm25", "tfidf", "fifo",
                                                                                               "focused")
    assert (config.paging.budget, config.paging.boundary, config.limit, config.oracle) == (300, "fixed_10", 2, False)
    assert [n for n, _ in EvalSweep().runs()] == ["bookmarks"]


def test_an_unknown_name_fails_before_any_run():
    with pytest.raises(ValueError, match="eviction"):
        EvalSweep(evictions=["fifo", "nope"]).runs()
    with pytest.raises(ValueError, match="layout"):
        EvalSweep(layouts=["sideways"]).runs()


def test_an_empty_sweep_runs_nothing_and_writes_nothing(tmp_path):
    assert run_eval_sweep([], EvalSweep(strategies=[]), json_out=tmp_path / "x.json") == ({}, [])


def _result(belady_hit: float, fifo_hit: float) -> SimulationResult:
    cell = dict(boundary="fixed_20", retriever=None, avg_pages=8.0, needs_recall=1, selection_accuracy=None, probes=2,
                avg_evicted=3.0)
    return SimulationResult(512, 3, 1, [Cell(eviction="fifo", hit_rate=fifo_hit, **cell),
                                        Cell(eviction="belady", hit_rate=belady_hit, **cell)])


def test_the_simulation_report_says_whether_belady_bounds_the_other_policies(tmp_path):
    assert simulation_report(_result(0.5, 0.5)).endswith("\nBelady bound: holds in every cell")
    report = simulation_report(_result(0.5, 1.0))
    assert "Belady bound: exceeded in:\n  fixed_20 fifo: 1.000 > 0.500 (" in report
    assert report.startswith(_result(0.5, 1.0).to_markdown())
    path = write_simulation(tmp_path / "sub" / "grid.json", _result(0.5, 0.5))
    assert json.loads(path.read_text())["budget"] == 512
