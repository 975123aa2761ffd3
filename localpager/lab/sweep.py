"""Sweeps: one evaluation run per combination of settings, and the paging simulator's report.

The CLI's ``eval`` and ``simulate`` parse options and print; what is run, how runs are named, when
results are written and what the simulator's report says are decided here, so a script gets the same
runs and the same numbers as the command.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.pager import PagingConfig
from ..core.records import Transcript
from .evaluate import EvalConfig, evaluate
from .report import write_eval
from .choices import BELADY
from .simulate import SimulationResult, belady_violations

if TYPE_CHECKING:
    from ..memory.models import ModelOptions

Progress = Callable[[Iterable[Any]], Iterable[Any]]  # e.g. tqdm


@dataclass
class EvalSweep:
    """The runs of one ``eval``: every strategy x eviction x keyword strategy x layout, each run with
    ``paging`` and ``config`` otherwise (their own strategy, eviction, keywords and layout are replaced), the
    model loading with ``loading`` (``evaluate``'s)."""

    strategies: Sequence[str] = ("bookmarks",)
    evictions: Sequence[str] = ("fifo",)
    keywords: Sequence[str] = ("heuristic",)
    layouts: Sequence[str] = ("focused",)
    paging: PagingConfig = field(default_factory=PagingConfig)
    config: EvalConfig = field(default_factory=EvalConfig)
    loading: ModelOptions | None = None

    def runs(self) -> list[tuple[str, EvalConfig]]:
        """(name, config) of every run, in order. A name is the strategy, plus each setting that takes
        more than one value in this sweep (``bookmarks eviction=lru layout=inline``)."""
        out = []
        for strategy, eviction, keywords, layout in itertools.product(
                self.strategies, self.evictions, self.keywords, self.layouts):
            paging = replace(self.paging, eviction=eviction, keywords=keywords)
            name = " ".join([strategy] + ([f"eviction={eviction}"] if len(self.evictions) > 1 else [])
                            + ([f"keywords={keywords}"] if len(self.keywords) > 1 else [])
                            + ([f"layout={layout}"] if len(self.layouts) > 1 else []))
            out.append((name, replace(self.config, strategy=strategy, paging=paging, layout=layout)))
        return out


def run_eval_sweep(conversations: Sequence[Transcript], sweep: EvalSweep, *,
                   progress: Callable[[str], Progress] | None = None,
                   json_out: str | Path | None = None) -> tuple[dict[str, dict[str, Any]], list[Path]]:
    """Run every run of ``sweep`` on ``conversations``; returns each run's report by name, and the files
    written. ``progress(name)`` wraps a run's probes (e.g. a tqdm bar named for the run). With
    ``json_out`` the results are written after every run, so a long sweep keeps what it has measured."""
    reports: dict[str, dict[str, Any]] = {}
    written: list[Path] = []
    for name, config in sweep.runs():
        report = evaluate(conversations, config, progress=progress(name) if progress else None,
                          loading=sweep.loading)
        reports[name] = report.to_dict()
        if json_out:
            written = write_eval(json_out, reports)
    return reports, written


def simulation_report(result: SimulationResult) -> str:
    """The simulator's table and, when the grid has Bélády's policy, whether it bounds every other policy."""
    lines = [result.to_markdown()]
    if any(cell.eviction == BELADY for cell in result.cells):
        violations = belady_violations(result)
        lines.append(f"\nBelady bound: {'holds in every cell' if not violations else 'exceeded in:'}")
        for v in violations:
            lines.append(f"  {v.boundary} {v.eviction}: {v.hit_rate:.3f} > {v.belady_hit_rate:.3f} ({v.explanation})")
    return "\n".join(lines)


def write_simulation(out: str | Path, result: SimulationResult) -> Path:
    """The simulation grid as JSON at ``out`` (its folder created)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result.to_dict(), indent=2))
    return out
