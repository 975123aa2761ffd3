"""Writing evaluation results: JSON, a Markdown table and PNG plots under a results folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

METRICS = ("e2e_accuracy", "oracle_e2e_accuracy", "page_selection_accuracy", "recall_precision",
           "recall_triggered", "false_recall_rate", "model_selection_accuracy", "evidence_resident",
           "repeated_answer_rate", "latest_value_rate", "general_recall_rate", "bookmark_fact_coverage",
           "standing_fact_recall", "general_contamination", "general_abstention", "abstention_rate",
           "false_abstention_rate")


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def eval_markdown(runs: dict[str, dict[str, Any]]) -> str:
    """One row per run (strategy or setting) with the headline metrics."""
    head = ["run", "probes", "needs recall", *METRICS, "p50 ms", "p95 ms", "assist ms/page"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in runs.items():
        assist = "; ".join(f"{kind} {v['ms_per_page']}" for kind, v in r.get("assist", {}).items()) or "–"
        row = [name, r["probes"], r["needs_recall"], *(r.get(m) for m in METRICS),
               r["latency_ms"]["p50"], r["latency_ms"]["p95"], assist]
        lines.append("| " + " | ".join(_fmt(v) for v in row) + " |")
    return "\n".join(lines)


def write_eval(out: str | Path, runs: dict[str, dict[str, Any]]) -> list[Path]:
    """``out`` JSON (all runs), and beside it the Markdown table and a bar plot of the metrics."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(runs if len(runs) > 1 else next(iter(runs.values())), indent=2, ensure_ascii=False))
    md = out.with_suffix(".md")
    md.write_text(eval_markdown(runs) + "\n")
    written = [out, md]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # plots are optional (the `eval` extra)
        return written
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / max(1, len(runs))
    for i, (name, r) in enumerate(runs.items()):
        xs = [j + i * width for j in range(len(METRICS))]
        ax.bar(xs, [r[m] or 0 for m in METRICS], width, label=name)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(METRICS))])
    ax.set_xticklabels([m.replace("_", "\n") for m in METRICS], fontsize=8)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    fig.tight_layout()
    png = out.with_suffix(".png")
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return written + [png]
