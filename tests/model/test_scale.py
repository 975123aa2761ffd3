"""benchmarks/scale.py runs end to end on the real models at a small length; its JSON has the promised shape
and its plot is written beside it. Only the shape is checked: speed targets belong to benchmarks/."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import LOCOMO, ROOT

pytestmark = [pytest.mark.model, pytest.mark.embedder, pytest.mark.slow]

KEYS = ("ingest_s", "ingest_turns_per_s", "store_mb", "peak_rss_mb", "rank_ms_p50", "rank_ms_p95", "answer_ms_p50",
        "answer_ms_p95", "cold_first_answer_ms", "page_selection")


def test_scale_reports_every_figure_per_length(tmp_path):
    out = tmp_path / "scale.json"
    real_text = [] if LOCOMO.exists() else ["--no-real-text"]  # LoCoMo's turns are the real text; beside the repo only
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--turns", "300,600", "--json", str(out),
                    "--workdir", str(tmp_path / "work"), *real_text], check=True, capture_output=True, text=True,
                   timeout=1200)
    data = json.loads(out.read_text())
    assert set(data["lengths"]) == {"300", "600"}
    for row in data["lengths"].values():
        assert all(isinstance(row[k], (int, float)) and row[k] >= 0 for k in KEYS)
        assert 0 <= row["page_selection"] <= 1 and row["questions"] > 0 and row["vectors"] > 0
    assert set(data["targets"]["600"]) and out.with_suffix(".png").stat().st_size > 0
