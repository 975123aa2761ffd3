"""Python subprocesses of a test run under ``make test-days`` (PYTHONPATH holds this folder) see the shifted clock."""
import os

if os.environ.get("SHIFT_DAYS", "0") not in ("", "0"):
    import shift_days  # noqa: F401
