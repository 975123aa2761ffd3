"""``make test-days`` runs the model tests with the wall clock shifted (tests/clock/shift_days.py): the shift must
reach the day localpager stamps a turn with, in the test process and in a Python subprocess, and every localpager
module that reads the clock through ``from datetime import`` must be one the plugin patches."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLOCK = ROOT / "tests" / "clock"


def test_a_subprocess_stamps_a_turn_with_the_shifted_day():
    env = {**os.environ, "SHIFT_DAYS": "40", "PYTHONPATH": os.pathsep.join([str(CLOCK), str(ROOT)])}
    code = ("import json, time; from localpager.core.dates import now_stamp; "
            "print(json.dumps([now_stamp(), time.time()]))")
    stamp, clock = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                             check=True, cwd=ROOT).stdout)
    shifted = date.today() + timedelta(days=40)
    assert date.fromisoformat(stamp[:10]) in (shifted, shifted + timedelta(days=1))  # a midnight between the two
    assert date.fromtimestamp(clock) in (shifted, shifted + timedelta(days=1))


def test_every_module_reading_the_clock_through_datetime_is_patched():
    sys.path.insert(0, str(CLOCK))
    try:
        import shift_days
    finally:
        sys.path.remove(str(CLOCK))
    reading = set()
    for path in (ROOT / "localpager").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "datetime" and any(
                    a.name in ("datetime", "date") for a in node.names):
                reading.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    assert reading == set(shift_days.TARGETS)
